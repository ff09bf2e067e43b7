// The users module's public entry: its routes, for the wiring (src/routes.ts).
export { usersRoutes } from './users.routes.js';
