// CreateSessionSpace, DescribeSessionSpace, DescribeSessionSpaces, ModifySessionSpace,
// DeleteSessionSpace: the spaces service behind the ags models.
import { z } from 'zod';
import { SpaceId } from '../../http/schemas.js';
import {
  CreateSpaceBody,
  ModifySpaceBody,
  createSpace,
  deleteSpace,
  describeSpace,
  listSpacesAtOffset,
  modifySpace,
} from '../spaces/index.js';
import { defineAction } from './tc3-action.js';
import { Tc3Error } from './tc3-errors.js';
import { Filter, type FilterValue, offsetLimit, toSessionSpaceInfo } from './tc3-models.js';
import { parseServiceInput } from './tc3-validation.js';

const Tag = z.strictObject({ Key: z.string().optional(), Value: z.string().optional() });

export const createSessionSpace = defineAction({
  request: z.strictObject({ Name: z.string(), Description: z.string().optional(), Tags: z.array(Tag).optional() }),
  permission: { action: 'session:CreateSessionSpace', scope: 'new-space' },
  async run({ db, principal }, input) {
    // Tags would be stored and never used: refused rather than silently dropped.
    if (input.Tags && input.Tags.length > 0) throw new Tc3Error('UnsupportedOperation', 'Tags: resource tags are not supported by this service; omit them.');
    const body = parseServiceInput(CreateSpaceBody, { name: input.Name, description: input.Description });
    return { SessionSpace: toSessionSpaceInfo((await createSpace(db, principal, body)).space) };
  },
});

export const describeSessionSpace = defineAction({
  request: z.strictObject({ SpaceId }),
  permission: { action: 'session:DescribeSessionSpaces', scope: 'space' },
  spaceIdOf: (input) => input.SpaceId,
  async run({ db, principal }, input) {
    return { SessionSpace: toSessionSpaceInfo(await describeSpace(db, principal.accountId, input.SpaceId)) };
  },
});

const SPACE_FILTERS = ['space-id', 'name', 'name-like', 'description-like'] as const;
type SpaceFilterName = (typeof SPACE_FILTERS)[number];

/** The filters by name, checked as the model states: known names, no repeats, name XOR name-like, no blank values. */
export function spaceFilters(filters: readonly FilterValue[]): Partial<Record<SpaceFilterName, string[]>> {
  const byName: Partial<Record<SpaceFilterName, string[]>> = {};
  for (const [index, filter] of filters.entries()) {
    if (!(SPACE_FILTERS as readonly string[]).includes(filter.Name)) {
      throw new Tc3Error('InvalidParameterValue', `Filters[${index}].Name: "${filter.Name}" is not a filter of DescribeSessionSpaces (${SPACE_FILTERS.join(', ')})`);
    }
    const name = filter.Name as SpaceFilterName;
    if (byName[name]) throw new Tc3Error('InvalidParameterValue', `Filters[${index}].Name: "${name}" is given twice`);
    const blank = filter.Values.findIndex((value) => value.trim() === '');
    if (blank >= 0) throw new Tc3Error('InvalidParameterValue', `Filters[${index}].Values[${blank}]: must not be empty or only whitespace`);
    byName[name] = filter.Values;
  }
  if (byName.name && byName['name-like']) throw new Tc3Error('InvalidParameterValue', 'Filters: name and name-like cannot be combined');
  return byName;
}

export const describeSessionSpaces = defineAction({
  request: z.strictObject({ ...offsetLimit(20, 100), Filters: z.array(Filter).optional() }),
  // Lets every caller in: the service lists only the spaces the policy lets it describe.
  permission: { action: 'session:DescribeSessionSpaces', scope: 'filtered-list' },
  async run({ db, principal }, input) {
    const filters = spaceFilters(input.Filters ?? []);
    // Matched and skipped in the database: case-sensitive, `%` and `_` literal in the -like ones.
    const match = { spaceIdIn: filters['space-id'], nameIn: filters.name, nameContainsAny: filters['name-like'], descriptionContainsAny: filters['description-like'] };
    const { spaces, totalCount } = await listSpacesAtOffset(db, principal, match, input.Offset, input.Limit);
    return { SessionSpaces: spaces.map(toSessionSpaceInfo), TotalCount: totalCount };
  },
});

export const modifySessionSpace = defineAction({
  request: z.strictObject({ SpaceId, Name: z.string(), Description: z.string().optional() }),
  permission: { action: 'session:ModifySessionSpace', scope: 'space' },
  spaceIdOf: (input) => input.SpaceId,
  async run({ db, principal }, input) {
    const body = parseServiceInput(ModifySpaceBody, { name: input.Name, description: input.Description });
    return { SessionSpace: toSessionSpaceInfo(await modifySpace(db, principal.accountId, input.SpaceId, body)) };
  },
});

export const deleteSessionSpace = defineAction({
  request: z.strictObject({ SpaceId }),
  permission: { action: 'session:DeleteSessionSpace', scope: 'space' },
  spaceIdOf: (input) => input.SpaceId,
  async run({ db, principal }, input) {
    await deleteSpace(db, principal.accountId, input.SpaceId);
    return {};
  },
});
