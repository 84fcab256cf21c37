// The console's entry: the API-key prompt when the API asks for a key,
// else the page the URL names.
import "./style.css";
import { render } from "preact";
import { useEffect, useState } from "preact/hooks";
import { apiKey, get, onUnauthorized, setAPIKey, APIError } from "./api";
import { Archive } from "./pages/Archive";
import { Compare } from "./pages/Compare";
import { Conversations } from "./pages/Conversations";
import { Images } from "./pages/Images";
import { Login } from "./pages/Login";
import { Overview } from "./pages/Overview";
import { Run } from "./pages/Run";
import { Runs } from "./pages/Runs";
import { Sandbox } from "./pages/Sandbox";
import { Sandboxes } from "./pages/Sandboxes";
import { SessionPage, Sessions } from "./pages/Sessions";
import { Snapshots } from "./pages/Snapshots";
import { TemplatePage, Templates } from "./pages/Templates";
import { useLocation } from "./router";
import { Empty } from "./ui";

const themeItem = "agent2env.theme";

/** The main navigation's pages: path and name. */
const pages = [
  ["/", "Overview"],
  ["/sandboxes", "Sandboxes"],
  ["/snapshots", "Snapshots"],
  ["/runs", "Runs"],
  ["/llm", "LLM"],
  ["/templates", "Templates"],
  ["/images", "Images"],
  ["/sessions", "Sessions"],
];

function applyTheme(t: string) {
  if (t) document.documentElement.dataset.theme = t;
  else delete document.documentElement.dataset.theme;
}
applyTheme(localStorage.getItem(themeItem) ?? "");

function Page({ url }: { url: URL }) {
  const parts = url.pathname.split("/").filter(Boolean).map(decodeURIComponent);
  switch (true) {
    case parts.length === 0:
      return <Overview />;
    case parts[0] === "sandboxes" && parts.length === 1:
      return <Sandboxes url={url} />;
    case parts[0] === "sandboxes" && parts.length === 2:
      return <Sandbox key={parts[1]} id={parts[1]} />;
    case parts[0] === "sandboxes" && parts.length === 3 && parts[2] === "conversations":
      return <Conversations key={parts[1]} sandbox={parts[1]} />;
    case parts[0] === "snapshots" && parts.length === 1:
      return <Snapshots />;
    case parts[0] === "runs" && parts.length === 1:
      return <Runs url={url} />;
    case parts[0] === "runs" && parts.length === 2 && parts[1] === "compare":
      return <Compare url={url} />;
    case parts[0] === "runs" && parts.length === 2:
      return <Run key={parts[1]} id={parts[1]} />;
    case parts[0] === "templates" && parts.length === 1:
      return <Templates url={url} />;
    case parts[0] === "templates" && parts.length === 2:
      return <TemplatePage key={parts[1]} name={parts[1]} />;
    case parts[0] === "llm" && parts.length === 1:
      return <Archive key={url.search} url={url} />;
    case parts[0] === "images" && parts.length === 1:
      return <Images />;
    case parts[0] === "sessions" && parts.length === 1:
      return <Sessions />;
    case parts[0] === "sessions" && parts.length === 2:
      return <SessionPage key={parts[1]} id={parts[1]} />;
  }
  return (
    <Empty>
      No page at {url.pathname}. <a href="/">Go to the overview</a>.
    </Empty>
  );
}

function App() {
  const url = useLocation();
  // undefined: not known yet whether the API wants a key.
  const [needKey, setNeedKey] = useState<boolean>();
  const [refused, setRefused] = useState(false);
  const check = () =>
    get("/api/v1/stats").then(
      () => setNeedKey(false),
      (e) => {
        setRefused(e instanceof APIError && e.status === 401 && apiKey() !== "");
        setNeedKey(e instanceof APIError && e.status === 401);
      },
    );
  useEffect(() => {
    check();
    return onUnauthorized(() => {
      setRefused(apiKey() !== "");
      setNeedKey(true);
    });
  }, []);
  const [theme, setTheme] = useState(localStorage.getItem(themeItem) ?? "");
  if (needKey === undefined) return <p class="loading">Connecting…</p>;
  if (needKey) return <Login refused={refused} onKey={check} />;
  const here = (p: string) =>
    url.pathname === p || (p !== "/" && url.pathname.startsWith(p + "/")) ? "page" : undefined;
  return (
    <>
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header>
        <nav aria-label="main">
          <a class="brand" href="/">
            agent2env
          </a>
          {pages.map(([path, name]) => (
            <a key={path} href={path} aria-current={here(path)}>
              {name}
            </a>
          ))}
        </nav>
        <div class="tools">
          <select
            aria-label="theme"
            value={theme}
            onChange={(e) => {
              const t = e.currentTarget.value;
              localStorage.setItem(themeItem, t);
              applyTheme(t);
              setTheme(t);
            }}
          >
            <option value="">system theme</option>
            <option value="dark">dark</option>
            <option value="light">light</option>
          </select>
          {apiKey() && (
            <button
              type="button"
              onClick={() => {
                setAPIKey("");
                setRefused(false);
                setNeedKey(true);
              }}
            >
              Forget key
            </button>
          )}
        </div>
      </header>
      <main id="main">
        <Page url={url} />
      </main>
    </>
  );
}

render(<App />, document.getElementById("app")!);
