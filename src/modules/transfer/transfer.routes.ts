// Export and import of a session (docs/design.md §4.9), as JSON or YAML.
import { Readable } from 'node:stream';
import { AppError, invalidParameter } from '../../errors.js';
import { MAX_BODY_NESTING } from '../../http/body-nesting.js';
import { unsupportedCharset } from '../../http/request-text.js';
import { SessionPath, SpacePath, errorResponses } from '../../http/schemas.js';
import type { AppDeps, ZodApp } from '../../http/zod-app.js';
import { CONTENT_TYPES, YAML_MEDIA_TYPES, chooseExportFormat, exportText, parseYamlDocument } from './transfer.format.js';
import { YamlValueError } from './yaml-json.js';
import { ExportDocument, type ExportDocumentValue, ExportQuery, IMPORT_BODY_BYTES, ImportResponse, MAX_TRANSFER_EVENTS, importSchemas } from './transfer.schemas.js';
import { maySeeSessionContents, writtenSessionAnswer } from '../sessions/index.js';
import { importSession, openExport } from './transfer.service.js';

/**
 * An export document holds values two levels deeper than the requests that wrote them: an event's
 * metadata sits at level 1 of an append's body and at level 3 of the document (`events[i].metadata`),
 * a session's state at level 1 of its creation and at 2 (`session.state`). A session written with
 * values as deep as their requests allow must import again (SPEC: an export re-creates the session).
 */
const IMPORT_BODY_NESTING = MAX_BODY_NESTING + 2;

export async function transferRoutes(app: ZodApp, { limits, expensiveSlots, exportSlots }: AppDeps): Promise<void> {
  const { ImportBody } = importSchemas(limits);

  app.get(
    '/spaces/:spaceId/users/:userId/sessions/:sessionId/export',
    {
      config: { action: 'session:ExportSession' },
      schema: {
        tags: ['sessions'],
        summary: 'Export a session with its whole history',
        operationId: 'exportSession',
        description:
          `A portable document (format ${ExportDocument.shape.format.value}) with everything needed to re-create the session: ids, seq, ` +
          'timestamps, revision, state, the user: and app: keys it sees (scopedState), memo and window. JSON by default; YAML with ' +
          '`Accept: application/yaml` (or text/yaml) or `?format=yaml`; `?format=json` forces JSON. Any other Accept answers JSON. ' +
          'The events are streamed in seq order, so a long history does not have to fit in memory. An account may have half of ' +
          'LIST_CONCURRENCY exports open at once on an instance, each from its first read to its last byte sent: past that its next ' +
          'export waits for one of them to finish. Each database read of an export (the session, then each chunk of events) takes one of ' +
          'the account\'s expensive-request slots (EXPENSIVE_PER_ACCOUNT) while it reads, so an export to a slow reader does not hold ' +
          'back the account\'s lists or state-at reads.',
        params: SessionPath,
        querystring: ExportQuery,
        response: {
          200: ExportDocument.describe('The export document, as JSON or YAML.'),
          ...errorResponses('ResourceNotFound.SessionSpace', 'ResourceNotFound.Session'),
        },
      },
    },
    async (request, reply) => {
      const format = chooseExportFormat(request.query.format, request.headers.accept);
      const { accountId } = request.principal;
      // One of the account's exports, held until the last byte is written or the client goes away,
      // so a client that reads slowly holds its own account's share of open exports only. Its
      // reads are expensive work, each in one of the account's expensive slots while it runs:
      // waiting for the reader holds none.
      const giveBack = await exportSlots.acquire(accountId);
      const inExpensiveSlot = <T>(read: () => Promise<T>) => expensiveSlots.run(accountId, read);
      let body: Readable;
      try {
        body = Readable.from(exportText(await inExpensiveSlot(() => openExport(request.db, { accountId, ...request.params }, inExpensiveSlot)), format));
      } catch (error) {
        giveBack();
        throw error;
      }
      body.once('close', giveBack);
      // A stream bypasses the response serializer; its text is the ExportDocument the schema documents.
      return reply.type(CONTENT_TYPES[format]).send(body as unknown as ExportDocumentValue);
    },
  );

  // Its own scope, so the YAML body parser and the larger body limit apply to import alone.
  await app.register(async (scope: ZodApp) => {
    scope.addContentTypeParser([...YAML_MEDIA_TYPES], { parseAs: 'string' }, (request, body, done) => {
      const charsetError = unsupportedCharset(request.headers['content-type']);
      if (charsetError) {
        done(charsetError, undefined);
        return;
      }
      try {
        done(null, parseYamlDocument(body as string, IMPORT_BODY_NESTING));
      } catch (error) {
        if (error instanceof YamlValueError) return done(invalidParameter(error.field, error.rule), undefined);
        const reason = error instanceof Error ? error.message.split('\n')[0] : 'unreadable';
        done(new AppError('InvalidParameter', `The body is not a valid YAML document: ${reason}`, { details: { issues: [{ field: 'body', message: 'must be one valid YAML document' }] } }), undefined);
      }
    });

    scope.post(
      '/spaces/:spaceId/sessions/import',
      {
        config: { action: 'session:ImportSession', bodyNesting: IMPORT_BODY_NESTING },
        bodyLimit: Math.max(IMPORT_BODY_BYTES, limits.bodyBytes),
        schema: {
          tags: ['sessions'],
          summary: 'Import a session from an export document',
          operationId: 'importSession',
          description:
            'Body: an export document as JSON (`Content-Type: application/json`) or YAML (`application/yaml`, `text/yaml`), at most ' +
            `${IMPORT_BODY_BYTES / (1024 * 1024)} MiB, ${MAX_TRANSFER_EVENTS} events and ${IMPORT_BODY_NESTING} levels of nesting (two more than other ` +
            'bodies: the document holds each value two levels deeper than the request that wrote it). An event\'s size is measured without ' +
            'seq, createTime, eventId and timestamp, as an append measures what it is sent. A YAML body must say only what JSON can (no ' +
            '!!binary, !!set or !!timestamp, no collection as a key, no tag the YAML 1.2 core schema does not resolve). The whole document is checked before anything is written; ' +
            'a bad one answers 400 naming the field (e.g. `events[3].seq`; metadata the rules refuse: InvalidParameter.Metadata), and a state ' +
            'over the limit, in the document or once its scoped state is merged, 413 LimitExceeded.State naming the scope (details.scope). The session keeps its ids, seq, timestamps, revision, memo and ' +
            'window; session.spaceId is ignored (it goes into the space of the path). An existing session with the same userId and ' +
            'sessionId answers 409 (an expired one is replaced). scopedState.user and scopedState.app are merged into the user\'s and the ' +
            'space\'s state: the document\'s top-level keys replace stored ones, other stored keys stay. A later append that resends an ' +
            'imported eventId is a replay only if it sends the event exactly as exported (without seq and createTime).',
          params: SpacePath,
          body: ImportBody,
          response: {
            201: ImportResponse,
            ...errorResponses(
              'InvalidParameter.Metadata',
              'ResourceNotFound.SessionSpace',
              'ResourceInUse.SessionExists',
              'LimitExceeded.State',
              'LimitExceeded.RequestSize',
              'UnsupportedMediaType',
            ),
          },
        },
      },
      async (request, reply) => {
        const { accountId } = request.principal;
        // Writes a whole history in one transaction: one of the account's expensive slots.
        const session = await expensiveSlots.run(accountId, () => importSession(request.db, limits, { accountId, spaceId: request.params.spaceId }, request.body));
        return reply.status(201).send(writtenSessionAnswer(session, maySeeSessionContents(request.principal, request.params.spaceId)));
      },
    );
  });
}
