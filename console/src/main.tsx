// The console's shell: sign-in gate, header with sign-out, and the page of the current route.
import { render } from 'preact';
import { useState } from 'preact/hooks';
import { type AgentSessionClient, clientFor, signOut, storedCredential } from './api.js';
import { useRoute } from './router.js';
import { SessionPage } from './session-page.js';
import { SignIn } from './sign-in.js';
import { SpacePage } from './space-page.js';
import { SpacesPage } from './spaces-page.js';
import './styles.css';

function App() {
  const [client, setClient] = useState<AgentSessionClient | undefined>(() => {
    const credential = storedCredential();
    return credential ? clientFor(credential) : undefined;
  });
  const route = useRoute();
  if (!client) return <SignIn onSignedIn={setClient} />;
  return (
    <>
      <a class="skip" href="#content" onClick={(event) => (event.preventDefault(), document.getElementById('content')?.focus())}>
        Skip to content
      </a>
      <header class="top">
        <a href="#/spaces" class="brand">
          Agent Session Console
        </a>
        <nav aria-label="Main">
          <a href="#/spaces">Spaces</a>
          <a href="/docs" target="_blank" rel="noreferrer">
            API reference
          </a>
        </nav>
        <button
          type="button"
          class="secondary"
          onClick={() => {
            signOut();
            setClient(undefined);
            history.replaceState(null, '', '#/');
          }}
        >
          Sign out
        </button>
      </header>
      <div id="content" tabIndex={-1}>
        {route.page === 'spaces' ? <SpacesPage client={client} query={route.query} /> : null}
        {route.page === 'space' ? <SpacePage key={route.spaceId} client={client} spaceId={route.spaceId} query={route.query} /> : null}
        {route.page === 'session' ? <SessionPage client={client} ids={{ spaceId: route.spaceId, userId: route.userId, sessionId: route.sessionId }} /> : null}
        {route.page === 'not-found' ? (
          <main>
            <h1>Not found</h1>
            <p>
              This page does not exist. <a href="#/spaces">Go to the spaces</a>
            </p>
          </main>
        ) : null}
      </div>
    </>
  );
}

render(<App />, document.getElementById('app')!);
