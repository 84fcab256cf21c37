package daemon

import (
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/agent2env/agent2env/internal/e2b"
	"github.com/agent2env/agent2env/internal/gateway"
	"github.com/agent2env/agent2env/internal/httpapi"
	"github.com/agent2env/agent2env/internal/mcpserver"
	"github.com/agent2env/agent2env/internal/opensandbox"
	"github.com/agent2env/agent2env/internal/service"
)

// surfaces speak to clients, over the services.
type surfaces struct {
	Gateway *gateway.Routes
	MCP     *mcpserver.Server
	// OpenSandbox is the OpenSandbox-compatible API (/v1/, and the execd
	// API under opensandbox.ExecdPrefix), which checks its own keys.
	OpenSandbox *opensandbox.Handler
	// E2B is the E2B-compatible API: its control-plane paths and every
	// request naming a sandbox with E2B's headers, before the daemon's own
	// routes and Bearer check (it checks its own keys and tokens).
	E2B *e2b.Handler
	API *httpapi.Server
	// Console serves the web console on its own listener; nil without
	// one.
	Console http.Handler
	// llmExchanges reads the LLM archive for the API; its follows end at
	// shutdown.
	llmExchanges *service.LLMExchanges
}

// buildSurfaces builds the port gateway, the MCP server and the HTTP API
// that mounts them, over the services. On error it returns what it built,
// for Close.
func buildSurfaces(cfg Config, st state, svc services) (sf surfaces, err error) {
	sf.Gateway = gateway.New(svc.Sandboxes, cfg.Log)
	sf.llmExchanges = service.NewLLMExchanges(svc.llmIndex)
	// REST and MCP share one view of the contexts.
	var copts []service.ContextsOption
	if st.KeyLocks != nil { // a store other daemons share
		copts = append(copts, service.WithSharedDefaults(st.KeyLocks("default context")))
	}
	contextsView := service.NewContexts(svc.Contexts, copts...)
	sf.MCP = mcpserver.New(mcpserver.Config{ScopeByKey: cfg.authOn(), Log: cfg.Log}, contextsView, svc.Sessions)
	sf.OpenSandbox, err = opensandbox.New(opensandbox.Config{
		Sandboxes: svc.Sandboxes, Execd: svc.Sandboxes, Commands: svc.Sandboxes, Files: svc.Sandboxes, Codes: contextsView,
		Metrics: svc.Sandboxes, Snapshots: svc.Sandboxes, Keys: cfg.Keys, RequireKey: cfg.authOn(),
		PublicHost: publicHost(cfg.PublicURL), GatewayPrefix: service.GatewayPrefix,
	})
	if err != nil {
		return sf, err
	}
	// The E2B API reaches other sandbox ports through the gateway.
	sf.E2B, err = e2b.New(e2b.Config{
		Sandboxes: svc.Sandboxes, Files: svc.Sandboxes, Procs: svc.Sandboxes, Contexts: contextsView, Ports: sf.Gateway,
		Snapshots: svc.Sandboxes, Keys: cfg.Keys, RequireKey: cfg.authOn(), PrivatePorts: cfg.PrivatePorts,
	})
	if err != nil {
		return sf, err
	}
	opts := []httpapi.Option{
		httpapi.WithRoutes(httpapi.NewLLMArchiveRoutes(sf.llmExchanges)),
		httpapi.WithRoutes(sf.Gateway),
		httpapi.WithRoutes(httpapi.NewTemplateRoutes(svc.Templates)),
		httpapi.WithRoutes(httpapi.NewPrepullRoutes(svc.Prepull)),
		httpapi.WithRoutes(httpapi.NewContextRoutes(contextsView)),
		httpapi.WithRoutes(httpapi.NewSessionRoutes(svc.Sessions)),
		httpapi.WithRoutes(sf.MCP),
		httpapi.WithRoutes(sf.OpenSandbox),
		httpapi.WithRoutes(svc.LLM),
		httpapi.WithRoutes(httpapi.NewLLMRoutes(svc.LLMKeys)),
		httpapi.WithRoutes(httpapi.NewRunRoutes(svc.Runs)),
		// Their errors take their own form, the daemon's refusals and a
		// panic's too; E2B's first, as its routes come first (Wrap).
		httpapi.WithSurface(sf.E2B),
		httpapi.WithSurface(sf.OpenSandbox),
		httpapi.WithMetrics(svc.Metrics),
		httpapi.WithReadyChecks(readyChecks(st)...),
	}
	if sf.Console, err = buildConsole(cfg); err != nil {
		return sf, err
	}
	// The pages of the console and of the operator's trusted origins use
	// the API, across origins (CORS) and past BrowserGuard.
	trusted := append(slices.Clone(cfg.TrustedOrigins), consoleOrigins(cfg.Console, cfg.PublicURL)...)
	cors, err := httpapi.CORS(trusted...)
	if err != nil {
		return sf, err
	}
	browsers, err := httpapi.BrowserGuard(httpapi.BrowserConfig{
		Listen: cfg.Listen, PublicURL: cfg.PublicURL, AllowedHosts: cfg.AllowedHosts, TrustedOrigins: trusted,
	})
	if err != nil {
		return sf, err
	}
	// CORS outermost: the pages read the API's refusals too.
	opts = append(opts, httpapi.WithMiddleware(cors))
	opts = append(opts, httpapi.WithMiddleware(browsers), httpapi.WithMiddleware(sf.E2B.Wrap))
	if cfg.authOn() {
		// Sessions are scoped by the key that passed the auth.
		opts = append(opts, httpapi.WithMiddleware(httpapi.AuthMiddlewareWithTickets(cfg.Keys, svc.Sandboxes, opensandbox.Prefixes...)), httpapi.WithMiddleware(httpapi.TenantMiddleware))
	}
	sf.API = httpapi.New(svc.Sandboxes, service.NewImages(st.Images, append(imagesOptions(st.Runtime), service.WithPins(svc.Sandboxes.SnapshotsOfImage))...), cfg.Log, opts...)
	return sf, nil
}

// publicHost is host[:port][/path] of the public URL, for the OpenSandbox
// API's endpoints; "" (each request's Host) when its host is unspecified
// (the default public URL of a daemon listening on all addresses).
func publicHost(publicURL string) string {
	u, err := url.Parse(publicURL)
	if err != nil || u.Host == "" {
		return ""
	}
	if h := u.Hostname(); h == "" || net.ParseIP(h) != nil && net.ParseIP(h).IsUnspecified() {
		return ""
	}
	return u.Host + strings.TrimSuffix(u.Path, "/")
}
