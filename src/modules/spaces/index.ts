// The spaces module's public entry: the space check every space-scoped operation starts with, and
// the services and schemas the API 3.0 face maps onto.
export { findSpaceOrThrow, spaceNotFound } from './space-lookup.js';
export { CreateSpaceBody, ModifySpaceBody, type SpaceView } from './spaces.schemas.js';
export { createSpace, deleteSpace, describeSpace, listSpacesAtOffset, modifySpace } from './spaces.service.js';
// For the wiring (src/routes.ts).
export { spacesRoutes } from './spaces.routes.js';
