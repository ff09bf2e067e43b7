// The error catalogue: every code the API can answer with, and the HTTP status it carries.
// Adding a code forces choosing its status.
export const ERROR_STATUS = {
  InvalidParameter: 400,
  'InvalidParameter.Metadata': 400,
  'InvalidParameter.StateDelta': 400,
  'InvalidParameter.PageToken': 400,
  MissingParameter: 400,
  AuthFailure: 401,
  UnauthorizedOperation: 403,
  'ResourceNotFound.SessionSpace': 404,
  'ResourceNotFound.Session': 404,
  'ResourceNotFound.Event': 404,
  // Beyond the specification's table (docs/design.md §6), which predates the IAM API: a sub-account or credential of the caller's account.
  'ResourceNotFound.SubAccount': 404,
  'ResourceNotFound.Credential': 404,
  // Beyond the specification's table (docs/design.md §6): an unknown path or method. Kept apart from the resource codes above.
  'ResourceNotFound.Route': 404,
  'InvalidParameter.EventIdDuplicate': 409,
  'ResourceInUse.SessionSpaceNotEmpty': 409,
  'OperationDenied.DefaultSessionSpaceProtected': 409,
  'ResourceInUse.SessionExists': 409,
  // Beyond the specification's table (docs/design.md §6): disabling or deleting the root's last enabled credential would lock the account out.
  'OperationDenied.LastRootCredential': 409,
  'FailedOperation.PreconditionFailed': 412,
  'LimitExceeded.RequestSize': 413,
  'LimitExceeded.State': 413,
  'LimitExceeded.Event': 413,
  // Beyond the specification's table (docs/design.md §6): a body that is not JSON (§3: JSON everywhere).
  UnsupportedMediaType: 415,
  // Not in docs/design.md §6: answered for Node's HTTP parser, before any route (http/connection-errors.ts).
  RequestTimeout: 408,
  'LimitExceeded.RequestHeaders': 431,
  RequestLimitExceeded: 429,
  InternalError: 500,
  'ResourceUnavailable.Database': 503,
  // Not in docs/design.md §6: a request that arrives while the instance drains for shutdown.
  'ResourceUnavailable.ShuttingDown': 503,
} as const satisfies Record<string, number>;

export type ErrorCode = keyof typeof ERROR_STATUS;

export interface AppErrorOptions {
  details?: Record<string, unknown>;
  headers?: Record<string, string>;
  cause?: unknown;
}

export class AppError extends Error {
  readonly status: number;
  readonly details: Record<string, unknown> | undefined;
  readonly headers: Record<string, string> | undefined;

  constructor(
    readonly code: ErrorCode,
    message: string,
    options: AppErrorOptions = {},
  ) {
    super(message, { cause: options.cause });
    this.name = 'AppError';
    this.status = ERROR_STATUS[code];
    this.details = options.details;
    this.headers = options.headers;
  }
}

/** One bad field, as listed in `details.issues` of an InvalidParameter error. */
export interface ParameterIssue {
  field: string;
  message: string;
}

export function invalidParameter(field: string, message: string): AppError {
  return new AppError('InvalidParameter', `${field}: ${message}`, { details: { issues: [{ field, message }] } });
}
