import { useState } from 'preact/hooks';
import { type AgentSessionClient, type Failure, signIn, toFailure } from './api.js';
import { ErrorMessage, FailureMessage } from './components.js';
import { malformedCredential, signInMessage, tokenOf } from './sign-in-messages.js';

/** What went wrong: a message about the pasted credential, with the service's answer behind it when there was one. */
type Refusal = { message: string; failure?: Failure };

export function SignIn({ onSignedIn }: { onSignedIn: (client: AgentSessionClient) => void }) {
  const [credential, setCredential] = useState('');
  const [refusal, setRefusal] = useState<Refusal | undefined>();
  const [busy, setBusy] = useState(false);
  const submit = async (event: Event) => {
    event.preventDefault();
    const token = tokenOf(credential);
    // A token of the wrong shape is named at once: the service could only refuse it.
    const malformed = malformedCredential(token);
    setRefusal(malformed === undefined ? undefined : { message: malformed });
    if (malformed !== undefined) return;
    setBusy(true);
    try {
      onSignedIn(await signIn(token));
    } catch (error) {
      const failure = toFailure(error);
      setRefusal({ message: signInMessage(failure) ?? failure.message, failure });
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
        {refusal?.failure ? <FailureMessage failure={{ ...refusal.failure, message: refusal.message }} /> : <ErrorMessage message={refusal?.message} />}
      </form>
    </main>
  );
}
