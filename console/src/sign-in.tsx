import { useState } from 'preact/hooks';
import { type AgentSessionClient, describeError, signIn } from './api.js';
import { ErrorMessage } from './components.js';

export function SignIn({ onSignedIn, notice }: { onSignedIn: (client: AgentSessionClient) => void; notice?: string | undefined }) {
  const [credential, setCredential] = useState('');
  const [error, setError] = useState<string | undefined>(notice);
  const [busy, setBusy] = useState(false);
  const submit = async (event: Event) => {
    event.preventDefault();
    setBusy(true);
    setError(undefined);
    try {
      onSignedIn(await signIn(credential.trim()));
    } catch (failure) {
      setError(describeError(failure));
    } finally {
      setBusy(false);
    }
  };
  return (
    <main class="sign-in">
      <form class="card" onSubmit={submit} aria-labelledby="sign-in-heading">
        <h1 id="sign-in-heading">Agent Session Console</h1>
        <p>Sign in with a credential of this service: the token <code>&lt;secretId&gt;.&lt;secretKey&gt;</code>. It is kept in this tab only.</p>
        <label for="credential">Credential</label>
        <input
          id="credential"
          name="credential"
          type="password"
          autoComplete="off"
          spellcheck={false}
          required
          value={credential}
          onInput={(event) => setCredential((event.target as HTMLInputElement).value)}
        />
        <button type="submit" disabled={busy || credential.trim() === ''}>
          Sign in
        </button>
        <ErrorMessage message={error} />
      </form>
    </main>
  );
}
