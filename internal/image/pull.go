package image

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"

	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/agent2env/agent2env/internal/errdefs"
)

// Pull fetches ref from its registry and stores it, replacing what was
// stored under ref before. Multi-platform images resolve to the store's
// platform. Concurrent Pull, Ensure and Build calls for the same ref share
// one operation. Names in the agent2env/ namespace are never pulled.
func (s *Store) Pull(ctx context.Context, ref string, p ProgressFunc) (*Image, error) {
	r, err := parseRef(ref)
	if err != nil {
		return nil, fmt.Errorf("pull image %s: %w", ref, err)
	}
	if r.local {
		return nil, fmt.Errorf("pull image %s: %w", ref, errdefs.Invalid("%s is local to this host and is never pulled", r.key))
	}
	return s.do(ctx, r.key, p, func(ctx context.Context, p ProgressFunc) (*Image, error) {
		return s.pull(ctx, r, p)
	})
}

// Ensure returns the image stored under ref; if there is none it builds
// it (built-in names) or pulls it. Concurrent Pull, Ensure and Build calls
// for the same ref share one operation.
func (s *Store) Ensure(ctx context.Context, ref string, p ProgressFunc) (*Image, error) {
	r, err := parseRef(ref)
	if err != nil {
		return nil, fmt.Errorf("ensure image %s: %w", ref, err)
	}
	if img, err := s.get(r); err == nil {
		report(p, Progress{Phase: PhaseDone, Item: img.Ref})
		return img, nil
	}
	return s.do(ctx, r.key, p, func(ctx context.Context, p ProgressFunc) (*Image, error) {
		// Another operation may have stored it since the check above.
		if img, err := s.get(r); err == nil {
			report(p, Progress{Phase: PhaseDone, Item: img.Ref})
			return img, nil
		}
		if !r.local {
			return s.pull(ctx, r, p)
		}
		rc, ok := recipes[r.key]
		if !ok {
			return nil, fmt.Errorf("ensure image %s: %w", r.key, errdefs.NotFound("image %s is not stored and has no built-in recipe", r.key))
		}
		return s.build(ctx, r, rc, p)
	})
}

func (s *Store) pull(ctx context.Context, r reference, p ProgressFunc) (*Image, error) {
	report(p, Progress{Phase: PhaseResolve, Item: r.key})
	nr, err := r.remote(s.insecure)
	if err != nil {
		return nil, fmt.Errorf("pull image %s: %w", r.key, err)
	}
	desc, err := remote.Get(nr,
		remote.WithContext(ctx),
		remote.WithAuthFromKeychain(s.keychain),
		remote.WithPlatform(s.platform),
		remote.WithUserAgent("agent2env"),
	)
	if err != nil {
		return nil, fmt.Errorf("pull image %s: %w", r.key, classify(err))
	}
	img, err := desc.Image()
	if err != nil {
		return nil, fmt.Errorf("pull image %s: resolve platform %s: %w", r.key, s.platform, classify(err))
	}
	manifest, err := img.RawManifest()
	if err != nil {
		return nil, fmt.Errorf("pull image %s: %w", r.key, classify(err))
	}
	config, err := img.RawConfigFile()
	if err != nil {
		return nil, fmt.Errorf("pull image %s: get config: %w", r.key, classify(err))
	}
	layers, err := img.Layers()
	if err != nil {
		return nil, fmt.Errorf("pull image %s: %w", r.key, classify(err))
	}
	src := source{refs: []reference{r}, config: config, manifest: manifest}
	for _, l := range layers {
		src.layers = append(src.layers, layerSource{remote: l})
	}
	s.log.Info("pulling image", logRef, r.key, "layers", len(layers))
	imgs, err := s.commit(ctx, src, p)
	if err != nil {
		return nil, fmt.Errorf("pull image %s: %w", r.key, err)
	}
	return imgs[0], nil
}

// classify adds the errdefs class to a registry client error.
func classify(err error) error {
	var te *transport.Error
	if errors.As(err, &te) {
		switch te.StatusCode {
		case http.StatusNotFound:
			return errdefs.Mark(err, errdefs.ErrNotFound)
		case http.StatusUnauthorized:
			return errdefs.Mark(err, errdefs.ErrUnauthenticated)
		case http.StatusForbidden:
			return errdefs.Mark(err, errdefs.ErrPermissionDenied)
		case http.StatusTooManyRequests:
			return errdefs.Mark(err, errdefs.ErrResourceExhausted)
		}
		if te.StatusCode >= 500 {
			return errdefs.Mark(err, errdefs.ErrUnavailable)
		}
		return err
	}
	var ne net.Error
	if errors.As(err, &ne) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		return errdefs.Mark(err, errdefs.ErrUnavailable)
	}
	return err
}
