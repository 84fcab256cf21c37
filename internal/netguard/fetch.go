package netguard

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// FetchConfig configures a Fetcher. Zero fields take the defaults.
type FetchConfig struct {
	// Guard checks every connection. Default: a Guard with no allow-list.
	Guard *Guard
	// MaxBytes bounds a response body; a longer one fails. Default 256 MiB.
	MaxBytes int64
	// Timeout bounds a whole fetch, body included. Default 10 minutes.
	Timeout time.Duration
	// MaxRedirects bounds the redirects followed. Default 5.
	MaxRedirects int
}

// Fetcher downloads http(s) URLs given by untrusted input. Make one with
// NewFetcher.
type Fetcher struct {
	cfg    FetchConfig
	client *http.Client
}

// NewFetcher returns a Fetcher.
func NewFetcher(cfg FetchConfig) *Fetcher {
	if cfg.Guard == nil {
		cfg.Guard = Must(New(Config{}))
	}
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = 256 << 20
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Minute
	}
	if cfg.MaxRedirects <= 0 {
		cfg.MaxRedirects = 5
	}
	tr := &http.Transport{
		Proxy:                 nil, // a proxy would connect where the guard cannot see
		DialContext:           cfg.Guard.DialContext(30 * time.Second),
		ForceAttemptHTTP2:     true,
		TLSHandshakeTimeout:   15 * time.Second,
		ResponseHeaderTimeout: 60 * time.Second,
		IdleConnTimeout:       30 * time.Second,
		MaxIdleConns:          16,
	}
	f := &Fetcher{cfg: cfg}
	f.client = &http.Client{
		Transport: tr,
		Timeout:   cfg.Timeout,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) > cfg.MaxRedirects {
				return fmt.Errorf("more than %d redirects", cfg.MaxRedirects)
			}
			// The dialer checks the address; this says plainly what is
			// wrong with a redirect to a plainly internal URL.
			return cfg.Guard.CheckURL(req.URL.String())
		},
	}
	return f
}

// ErrTooLarge is the class of a body longer than MaxBytes.
var ErrTooLarge = errors.New("response body too large")

// Open GETs rawURL and returns the body of its 200 answer, which fails
// with ErrTooLarge past MaxBytes. The caller closes it.
func (f *Fetcher) Open(ctx context.Context, rawURL string) (io.ReadCloser, error) {
	if err := f.cfg.Guard.CheckURL(rawURL); err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return nil, err
	}
	resp, err := f.client.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		if resp.Request.URL.String() != req.URL.String() {
			return nil, fmt.Errorf("%s (redirected to %s)", resp.Status, resp.Request.URL.Redacted())
		}
		return nil, errors.New(resp.Status)
	}
	if resp.ContentLength > f.cfg.MaxBytes {
		resp.Body.Close()
		return nil, fmt.Errorf("%w: %d bytes, more than %d", ErrTooLarge, resp.ContentLength, f.cfg.MaxBytes)
	}
	return &limitedBody{ReadCloser: resp.Body, left: f.cfg.MaxBytes, max: f.cfg.MaxBytes}, nil
}

// limitedBody fails a read past max bytes instead of ending quietly.
type limitedBody struct {
	io.ReadCloser
	left, max int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// Only more data is an error; the end right at max is not.
		var one [1]byte
		if n, err := b.ReadCloser.Read(one[:]); n == 0 {
			return 0, err
		}
		return 0, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, b.max)
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}
