// The API-key prompt, shown when the API answers 401.
import { useState } from "preact/hooks";
import { apiOrigin, setAPIKey } from "../api";

export function Login({ onKey, refused }: { onKey: () => void; refused: boolean }) {
  const [key, setKey] = useState("");
  return (
    <main class="login">
      <h1>agent2env</h1>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          setAPIKey(key.trim());
          onKey();
        }}
      >
        <label for="key">API key</label>
        <input
          id="key"
          type="password"
          autocomplete="off"
          autofocus
          value={key}
          onInput={(e) => setKey(e.currentTarget.value)}
        />
        {refused && (
          <p class="error" role="alert">
            The API at {apiOrigin} refused the key. Use a key from the daemon's --api-keys-file or its
            AGENT2ENV_API_KEYS.
          </p>
        )}
        <button type="submit" disabled={!key.trim()}>
          Sign in
        </button>
        <p class="hint">The key stays in this tab only (sessionStorage) and is sent to {apiOrigin}.</p>
      </form>
    </main>
  );
}
