// agent-session-client/adk: the Google ADK session service. Needs the peer dependency @google/adk.
export { AdkSessionService, type AdkSessionServiceOptions } from './adk-session-service.js';
export { ADK_RESIDUE_KEY, decodeAdkEvent, encodeAdkEvent } from './adk-event-codec.js';
