package daemon

import (
	"errors"
	"net"
	"net/http"
	"net/url"
	"strconv"

	"github.com/agent2env/agent2env/internal/console"
	"github.com/agent2env/agent2env/internal/httpapi"
)

// consoleOrigins are the web origins of the console on l: its address,
// and localhost for a loopback one, the two names a browser on this
// machine reaches it by. nil without a console.
func consoleOrigins(l net.Listener) []string {
	if l == nil {
		return nil
	}
	a, ok := l.Addr().(*net.TCPAddr)
	if !ok {
		return nil
	}
	port := strconv.Itoa(a.Port)
	origins := []string{"http://" + net.JoinHostPort(a.IP.String(), port)}
	if a.IP.IsLoopback() {
		origins = append(origins, "http://localhost:"+port)
	}
	return origins
}

// consoleAPIOrigin is the API's origin as the console's pages call it: the
// public URL's, with an unspecified host (a daemon listening on every
// address) replaced by loopback, where the console listens by default.
func consoleAPIOrigin(publicURL string) string {
	u, err := url.Parse(publicURL)
	if err != nil {
		return publicURL // console.Handler says what is wrong with it
	}
	if h := u.Hostname(); h == "" || net.ParseIP(h) != nil && net.ParseIP(h).IsUnspecified() {
		u.Host = net.JoinHostPort("127.0.0.1", u.Port())
	}
	return u.Scheme + "://" + u.Host
}

// buildConsole builds the console's handler and the API's CORS middleware
// for its origins; both nil without a console listener.
func buildConsole(cfg Config) (http.Handler, func(http.Handler) http.Handler, error) {
	if cfg.Console == nil {
		return nil, nil, nil
	}
	h, err := console.Handler(console.Config{APIOrigin: consoleAPIOrigin(cfg.PublicURL)})
	if err != nil {
		return nil, nil, err
	}
	cors, err := httpapi.CORS(consoleOrigins(cfg.Console)...)
	if err != nil {
		return nil, nil, err
	}
	return h, cors, nil
}

// serveConsole serves the web console on its listener until the returned
// func is called, which closes it (its requests are for files: there is
// nothing to drain). A console server that fails is logged and the API
// goes on without it: the console is a convenience, the API the service.
func (s *System) serveConsole() (stop func()) {
	if s.Console == nil {
		return func() {}
	}
	srv := httpapi.NewServer(s.cfg.HTTP, s.Console, s.log)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(s.cfg.Console); !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("the console's server failed: the API goes on without it", "err", err)
		}
	}()
	s.log.Info("console", "url", "http://"+s.cfg.Console.Addr().String()+"/")
	return func() {
		srv.Close()
		<-done
	}
}
