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
// machine reaches it by. On every address (0.0.0.0, ::) a browser names
// the host: the public URL's host (the name clients reach the daemon by),
// and loopback and localhost, each at the console's port, the first the
// one to give people. nil without a console.
func consoleOrigins(l net.Listener, publicURL string) []string {
	if l == nil {
		return nil
	}
	a, ok := l.Addr().(*net.TCPAddr)
	if !ok {
		return nil
	}
	port := strconv.Itoa(a.Port)
	origin := func(host string) string { return "http://" + net.JoinHostPort(host, port) }
	if !a.IP.IsUnspecified() {
		origins := []string{origin(a.IP.String())}
		if a.IP.IsLoopback() {
			origins = append(origins, origin("localhost"))
		}
		return origins
	}
	var origins []string
	if u, err := url.Parse(publicURL); err == nil && u.Hostname() != "" {
		if ip := net.ParseIP(u.Hostname()); ip == nil || !ip.IsUnspecified() && !ip.IsLoopback() {
			origins = append(origins, origin(u.Hostname()))
		}
	}
	return append(origins, origin("127.0.0.1"), origin("localhost"))
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

// buildConsole builds the console's handler; nil without a console
// listener.
func buildConsole(cfg Config) (http.Handler, error) {
	if cfg.Console == nil {
		return nil, nil
	}
	return console.Handler(console.Config{APIOrigin: consoleAPIOrigin(cfg.PublicURL)})
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
	at := "http://" + s.cfg.Console.Addr().String() + "/"
	if origins := consoleOrigins(s.cfg.Console, s.cfg.PublicURL); len(origins) > 0 {
		at = origins[0] + "/"
	}
	s.log.Info("console", "url", at)
	return func() {
		srv.Close()
		<-done
	}
}
