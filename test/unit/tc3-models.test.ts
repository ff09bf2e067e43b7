// The pure half of the API 3.0 face: request models and their error codes, the EventInfo ↔ event
// mapping, the Filters of the two list actions, ModifySession's whole replacement, Offset paging.
import { describe, expect, it } from 'vitest';
import { sessionFilterQuery } from '../../src/modules/tencent/session-actions.js';
import { spaceFilters } from '../../src/modules/tencent/space-actions.js';
import { TC3_ACTIONS } from '../../src/modules/tencent/tc3-actions.js';
import { Tc3Error } from '../../src/modules/tencent/tc3-errors.js';
import { EventInfoInput, MAX_OFFSET, eventInputOf, metadataObject, toEventInfo, toSessionInfo } from '../../src/modules/tencent/tc3-models.js';
import { parseModel, pascalPath, withoutNulls } from '../../src/modules/tencent/tc3-validation.js';
import { EventInput } from '../../src/modules/events/events.schemas.js';

function refusal(run: () => unknown): { code: string; message: string } {
  try {
    run();
  } catch (error) {
    if (error instanceof Tc3Error) return { code: error.code, message: error.message };
    throw error;
  }
  throw new Error('expected a Tc3Error');
}

const SPACE = 'space-0b9d6f3e-6a57-4a43-9a4f-3d3f0f1c2b1a';

describe('request models', () => {
  it('serves exactly the twelve Session actions', () => {
    expect(Object.keys(TC3_ACTIONS).sort()).toEqual(
      ['AppendEvent', 'CreateSession', 'CreateSessionSpace', 'DeleteSession', 'DeleteSessionSpace', 'DescribeEvents', 'DescribeSession', 'DescribeSessionSpace', 'DescribeSessionSpaces', 'DescribeSessions', 'ModifySession', 'ModifySessionSpace'].sort(),
    );
  });

  it('answers MissingParameter, UnknownParameter, InvalidParameter and InvalidParameterValue naming the field', () => {
    const request = TC3_ACTIONS.AppendEvent!.request;
    const key = { SpaceId: SPACE, UserId: 'u', SessionId: 's' };
    expect(refusal(() => parseModel(request, { SpaceId: SPACE, UserId: 'u', Event: {} }))).toEqual({ code: 'MissingParameter', message: expect.stringMatching(/^SessionId: /) });
    expect(refusal(() => parseModel(request, { ...key, Event: {}, Extra: 1 }))).toEqual({ code: 'UnknownParameter', message: 'Extra: not a parameter of this action' });
    expect(refusal(() => parseModel(request, { ...key, Event: { Colour: 1 } }))).toEqual({ code: 'UnknownParameter', message: 'Event.Colour: not a parameter of this action' });
    expect(refusal(() => parseModel(request, { ...key, Event: { Content: { Parts: [{ Thought: 'yes' }] } } })).code).toBe('InvalidParameter');
    expect(refusal(() => parseModel(request, { ...key, Event: { Actions: { StateDelta: '"x"' } } }))).toEqual({
      code: 'InvalidParameterValue',
      message: expect.stringMatching(/^Event\.Actions\.StateDelta: must be a JSON string holding a JSON object/),
    });
    expect(refusal(() => parseModel(TC3_ACTIONS.DescribeEvents!.request, { ...key, Limit: 201 }))).toEqual({ code: 'InvalidParameterValue', message: 'Limit: must be at most 200' });
  });

  it('applies the models\' paging defaults', () => {
    const key = { SpaceId: SPACE, UserId: 'u', SessionId: 's' };
    expect(parseModel(TC3_ACTIONS.DescribeEvents!.request, key)).toMatchObject({ Offset: 0, Limit: 50 });
    expect(parseModel(TC3_ACTIONS.DescribeSessions!.request, { SpaceId: SPACE })).toMatchObject({ Offset: 0, Limit: 20 });
  });

  it('drops null members deep, but not inside JSON strings', () => {
    expect(withoutNulls({ a: null, b: { c: null, d: '{"e":null}' }, f: [1, null] })).toEqual({ b: { d: '{"e":null}' }, f: [1] });
  });
});

describe('EventInfo', () => {
  const info = {
    EventId: 'e-1',
    InvocationId: 'inv',
    Author: 'assistant',
    Content: {
      Role: 'model',
      Parts: [{ Text: '你好', Thought: true }, { FunctionCall: '{"name":"f","args":{"x":1}}' }, { FunctionResponse: '{"name":"f","response":{"ok":true}}' }, { InlineData: { MimeType: 'image/png', Data: 'iVBORw0K' } }],
    },
    Actions: { StateDelta: '{"k":{"n":1},"gone":null}' },
    Metadata: '{"source":"web"}',
    Extensions: '{"x":[1,2]}',
    ErrorCode: 'E1',
    ErrorMessage: 'oops',
    Timestamp: '2026-11-30T08:00:00.000Z',
  };

  it('maps to the REST event input, which the REST schema accepts', () => {
    const input = eventInputOf(parseModel(EventInfoInput, info));
    expect(input).toEqual({
      eventId: 'e-1',
      invocationId: 'inv',
      author: 'assistant',
      content: {
        role: 'model',
        parts: [{ text: '你好', thought: true }, { functionCall: { name: 'f', args: { x: 1 } } }, { functionResponse: { name: 'f', response: { ok: true } } }, { inlineData: { mimeType: 'image/png', data: 'iVBORw0K' } }],
      },
      actions: { stateDelta: { k: { n: 1 }, gone: null } },
      metadata: { source: 'web' },
      extensions: { x: [1, 2] },
      errorCode: 'E1',
      errorMessage: 'oops',
      timestamp: '2026-11-30T08:00:00.000Z',
    });
    expect(EventInput.safeParse(input).success).toBe(true);
  });

  it('maps a stored event back to the same EventInfo', () => {
    const input = eventInputOf(parseModel(EventInfoInput, info));
    const view = { ...input, seq: 1, createTime: '2026-11-30T08:00:01.000Z' } as Parameters<typeof toEventInfo>[0];
    expect(toEventInfo(view)).toEqual(info);
  });

  it('treats an empty EventId as absent (generated)', () => {
    expect(eventInputOf(parseModel(EventInfoInput, { EventId: '', Author: 'u' }))).toEqual({ author: 'u' });
  });

  it('renames REST issue paths to the model\'s fields', () => {
    expect(pascalPath(['Event'])(['content', 'parts', 0, 'functionCall', 'name'])).toBe('Event.Content.Parts[0].FunctionCall.Name');
    expect(pascalPath([], { state: 'State.CustomState' })(['state'])).toBe('State.CustomState');
  });
});

describe('SessionInfo and metadata', () => {
  it('answers State as a JSON string and Metadata as MetadataVar items; a write without read access has neither', () => {
    const base = { spaceId: SPACE, userId: 'u', sessionId: 's', windowStartSeq: 1, eventCount: 2, revision: 3, createTime: 't0', updateTime: 't1', expireTime: null };
    expect(toSessionInfo({ ...base, title: 'T', metadata: { a: '1' }, state: { k: 1 }, memo: null })).toEqual({
      SessionId: 's',
      SpaceId: SPACE,
      UserId: 'u',
      Title: 'T',
      State: { CustomState: '{"k":1}' },
      Metadata: [{ Name: 'a', Value: '1' }],
      EventCount: 2,
      CreateTime: 't0',
      UpdateTime: 't1',
    });
    expect(Object.keys(toSessionInfo(base))).toEqual(['SessionId', 'SpaceId', 'UserId', 'EventCount', 'CreateTime', 'UpdateTime']);
  });

  it('refuses a repeated metadata Name', () => {
    expect(metadataObject([{ Name: 'a', Value: '1' }, { Name: 'a', Value: '2' }])).toMatch(/^Metadata\[1\]\.Name: "a" is given twice/);
    expect(metadataObject([{ Name: 'a', Value: '' }])).toEqual({ a: '' });
  });

});

describe('Filters', () => {
  it('turns DescribeSessions filters into the REST query', () => {
    expect(
      sessionFilterQuery([
        { Name: 'metadata:env', Values: ['prod', 'dev'] },
        { Name: 'metadata:example.com/team', Values: ['a=b'] },
        { Name: 'title-like', Values: ['50%'] },
      ]),
    ).toEqual({ metadata: ['env=prod', 'env=dev', 'example.com/team=a=b'], titleLike: '50%' });
    expect(refusal(() => sessionFilterQuery([{ Name: 'title', Values: ['a'] }, { Name: 'title', Values: ['b'] }])).message).toMatch(/given twice/);
    expect(refusal(() => sessionFilterQuery([{ Name: 'title', Values: ['  '] }])).message).toMatch(/^Filters\[0\]\.Values\[0\]/);
    expect(refusal(() => sessionFilterQuery([{ Name: 'metadata:', Values: ['x'] }])).code).toBe('InvalidParameterValue');
  });

  // Matching itself is SQL now (tencent-api.test.ts, "filters DescribeSessionSpaces …").
  it('checks the DescribeSessionSpaces filters as the model states', () => {
    expect(spaceFilters([{ Name: 'name', Values: ['x', 'y'] }, { Name: 'space-id', Values: [SPACE] }])).toEqual({ name: ['x', 'y'], 'space-id': [SPACE] });
    expect(refusal(() => spaceFilters([{ Name: 'name', Values: ['a'] }, { Name: 'name-like', Values: ['b'] }])).message).toMatch(/cannot be combined/);
    expect(refusal(() => spaceFilters([{ Name: 'tag', Values: ['a'] }])).message).toMatch(/^Filters\[0\]\.Name/);
  });
});

describe('Offset', () => {
  it('is served up to MAX_OFFSET on the three list actions, and refused past it naming the field and the rule', () => {
    const key = { SpaceId: SPACE, UserId: 'u', SessionId: 's' };
    const lists = { DescribeEvents: key, DescribeSessions: { SpaceId: SPACE }, DescribeSessionSpaces: {} };
    for (const [action, fields] of Object.entries(lists)) {
      const request = TC3_ACTIONS[action]!.request;
      expect(parseModel(request, { ...fields, Offset: MAX_OFFSET })).toMatchObject({ Offset: MAX_OFFSET });
      const refused = refusal(() => parseModel(request, { ...fields, Offset: MAX_OFFSET + 1 }));
      expect(refused.code).toBe('InvalidParameterValue');
      expect(refused.message).toMatch(/^Offset: must be at most 10000\b/);
      expect(refusal(() => parseModel(request, { ...fields, Offset: 1e12 })).code).toBe('InvalidParameterValue');
    }
  });
});
