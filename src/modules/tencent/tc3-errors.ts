// The error codes of the API 3.0 face and how the service's own errors translate into them. The
// SDKs read `Response.Error.Code` only from an HTTP 200 answer, so every code here goes out with
// status 200 (tc3.routes.ts); the codes are Tencent Cloud's common codes and the ones its SDKs
// list for the ags Session actions (docs/tencent-api.md).
import { type AppError, type ErrorCode } from '../../errors.js';

export const TC3_ERROR_CODES = [
  'AuthFailure.InvalidAuthorization',
  'AuthFailure.SignatureExpire',
  'AuthFailure.SignatureFailure',
  'AuthFailure.SecretIdNotFound',
  'AuthFailure.InvalidSecretId',
  'AuthFailure.UnauthorizedOperation',
  'InvalidAction',
  'NoSuchVersion',
  'MissingParameter',
  'UnknownParameter',
  'InvalidParameter',
  'InvalidParameterValue',
  'InvalidParameter.Metadata',
  'InvalidParameter.StateDelta',
  'InvalidParameter.EventIdDuplicate',
  'InvalidParameter.DefaultSessionSpaceProtected',
  'ResourceInUse.SessionSpaceNotEmpty',
  'ResourceNotFound.SessionSpaceNotExist',
  'ResourceNotFound.Session',
  'ResourceNotFound.SessionNotExist',
  'LimitExceeded.State',
  'LimitExceeded.Event',
  'RequestSizeLimitExceeded',
  'RequestLimitExceeded',
  'UnsupportedOperation',
  'ResourceUnavailable.Database',
  'InternalError',
] as const;

export type Tc3ErrorCode = (typeof TC3_ERROR_CODES)[number];

export class Tc3Error extends Error {
  override name = 'Tc3Error';
  constructor(
    readonly code: Tc3ErrorCode,
    message: string,
  ) {
    super(message);
  }
}

/**
 * The two spellings the SDKs list for a missing session: DescribeSession and AppendEvent answer
 * `ResourceNotFound.Session`, the others `ResourceNotFound.SessionNotExist`.
 */
export type SessionNotFoundCode = 'ResourceNotFound.Session' | 'ResourceNotFound.SessionNotExist';

/** The code of each service error on this face (a `satisfies` map: a new service code must be placed). */
const FROM_SERVICE = {
  InvalidParameter: 'InvalidParameterValue',
  'InvalidParameter.Metadata': 'InvalidParameter.Metadata',
  'InvalidParameter.StateDelta': 'InvalidParameter.StateDelta',
  'InvalidParameter.PageToken': 'InvalidParameterValue',
  MissingParameter: 'MissingParameter',
  AuthFailure: 'AuthFailure.SignatureFailure',
  UnauthorizedOperation: 'AuthFailure.UnauthorizedOperation',
  'ResourceNotFound.SessionSpace': 'ResourceNotFound.SessionSpaceNotExist',
  'ResourceNotFound.Session': 'ResourceNotFound.SessionNotExist',
  'ResourceNotFound.Event': 'InvalidParameterValue',
  'ResourceNotFound.SubAccount': 'InvalidParameterValue',
  'ResourceNotFound.Credential': 'InvalidParameterValue',
  'ResourceNotFound.Route': 'InvalidAction',
  'InvalidParameter.EventIdDuplicate': 'InvalidParameter.EventIdDuplicate',
  'ResourceInUse.SessionSpaceNotEmpty': 'ResourceInUse.SessionSpaceNotEmpty',
  'OperationDenied.DefaultSessionSpaceProtected': 'InvalidParameter.DefaultSessionSpaceProtected',
  'ResourceInUse.SessionExists': 'InvalidParameterValue',
  'OperationDenied.LastRootCredential': 'UnsupportedOperation',
  'FailedOperation.PreconditionFailed': 'InternalError',
  'LimitExceeded.RequestSize': 'RequestSizeLimitExceeded',
  'LimitExceeded.State': 'LimitExceeded.State',
  'LimitExceeded.Event': 'LimitExceeded.Event',
  UnsupportedMediaType: 'InvalidParameter',
  RequestTimeout: 'InternalError',
  'LimitExceeded.RequestHeaders': 'RequestSizeLimitExceeded',
  RequestLimitExceeded: 'RequestLimitExceeded',
  InternalError: 'InternalError',
  'ResourceUnavailable.Database': 'ResourceUnavailable.Database',
  'ResourceUnavailable.ShuttingDown': 'ResourceUnavailable.Database',
} as const satisfies Record<ErrorCode, Tc3ErrorCode>;

/** A service error as this face answers it; `sessionNotFound` picks the action's spelling. */
export function fromAppError(error: AppError, sessionNotFound: SessionNotFoundCode = 'ResourceNotFound.SessionNotExist'): Tc3Error {
  const code = error.code === 'ResourceNotFound.Session' ? sessionNotFound : FROM_SERVICE[error.code];
  return new Tc3Error(code, error.message);
}
