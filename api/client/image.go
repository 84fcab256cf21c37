package client

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/sse"
)

// ImageService holds the image endpoints. Use it as Client.Image.
type ImageService struct {
	c *Client
}

// ProgressFunc receives the progress events of a pull, build or import.
// It is called on the calling goroutine, one event at a time, and may be
// nil.
type ProgressFunc func(api.ImageProgress)

// List returns the stored images.
func (s *ImageService) List(ctx context.Context) ([]api.Image, error) {
	var l api.List[api.Image]
	if err := s.c.doJSON(ctx, http.MethodGet, "/images", nil, &l); err != nil {
		return nil, wrapf(err, "list images")
	}
	return l.Items, nil
}

// Pull fetches an image from its registry, reporting progress to fn.
func (s *ImageService) Pull(ctx context.Context, ref string, fn ProgressFunc) (*api.Image, error) {
	img, err := s.one(ctx, "/images/pull", ref, fn)
	if err != nil {
		return nil, wrapf(err, "pull image %s", ref)
	}
	return img, nil
}

// Build builds one of the daemon's built-in images (agent2env/python,
// agent2env/node), reporting progress to fn.
func (s *ImageService) Build(ctx context.Context, name string, fn ProgressFunc) (*api.Image, error) {
	img, err := s.one(ctx, "/images/build", name, fn)
	if err != nil {
		return nil, wrapf(err, "build image %s", name)
	}
	return img, nil
}

// Follow follows the pull or build of ref that is in flight on the daemon
// (for a pending sandbox's image, say), reporting its progress from its
// beginning to fn, and returns the image once it is stored. It starts no
// pull or build: ref stored with none in flight returns at once, and ref
// neither stored nor in flight is an ErrNotFound. Ending ctx ends only the
// following.
func (s *ImageService) Follow(ctx context.Context, ref string, fn ProgressFunc) (*api.Image, error) {
	if ref == "" {
		return nil, invalidf("follow image: ref is empty")
	}
	imgs, err := s.streamReq(ctx, http.MethodGet, "/images/follow", url.Values{"ref": {ref}}, nil, "", fn)
	if err != nil {
		return nil, wrapf(err, "follow image %s", ref)
	}
	return &imgs[0], nil
}

// one runs a pull or build, whose stream ends with one image.
func (s *ImageService) one(ctx context.Context, path, ref string, fn ProgressFunc) (*api.Image, error) {
	body, err := jsonBody(api.ImageRequest{Ref: ref})
	if err != nil {
		return nil, err
	}
	imgs, err := s.stream(ctx, path, body, "application/json", fn)
	if err != nil {
		return nil, err
	}
	return &imgs[0], nil
}

// Import loads the images of a `docker save` or OCI layout tarball read
// from r, which is streamed to the daemon, reporting the daemon's
// progress to fn.
func (s *ImageService) Import(ctx context.Context, r io.Reader, fn ProgressFunc) ([]api.Image, error) {
	imgs, err := s.stream(ctx, "/images/import", r, "application/x-tar", fn)
	if err != nil {
		return nil, wrapf(err, "import images")
	}
	return imgs, nil
}

// Remove deletes a stored image by reference or ID.
func (s *ImageService) Remove(ctx context.Context, ref string) error {
	if ref == "" {
		return invalidf("remove image: ref is empty")
	}
	// The route takes the rest of the path, slashes included.
	segs := strings.Split(ref, "/")
	for i, seg := range segs {
		segs[i] = url.PathEscape(seg)
	}
	if err := s.c.doJSON(ctx, http.MethodDelete, "/images/"+strings.Join(segs, "/"), nil, nil); err != nil {
		return wrapf(err, "remove image %s", ref)
	}
	return nil
}

// stream posts body and reads the progress stream that answers it: it
// calls fn for every "progress" event and returns the images of the
// "image" events, or the error of an "error" event.
func (s *ImageService) stream(ctx context.Context, path string, body io.Reader, contentType string, fn ProgressFunc) ([]api.Image, error) {
	return s.streamReq(ctx, http.MethodPost, path, nil, body, contentType, fn)
}

// streamReq sends a request answered by a progress stream and reads it as
// stream does.
func (s *ImageService) streamReq(ctx context.Context, method, path string, query url.Values, body io.Reader, contentType string,
	fn ProgressFunc) ([]api.Image, error) {
	resp, err := s.c.send(ctx, method, apiPrefix+path, query, body, contentType)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var imgs []api.Image
	events := sse.NewReader(resp.Body)
	for {
		ev, err := events.Next()
		if errors.Is(err, io.EOF) {
			if len(imgs) == 0 {
				return nil, errors.New("progress stream ended without an image")
			}
			return imgs, nil
		}
		if err != nil {
			return nil, wrapf(err, "read progress stream")
		}
		switch ev.Name {
		case "progress":
			var p api.ImageProgress
			if err := json.Unmarshal(ev.Data, &p); err != nil {
				return nil, wrapf(err, "decode progress event")
			}
			if fn != nil {
				fn(p)
			}
		case "image":
			var img api.Image
			if err := json.Unmarshal(ev.Data, &img); err != nil {
				return nil, wrapf(err, "decode image event")
			}
			imgs = append(imgs, img)
		case "error":
			return nil, streamError(ev.Data)
		}
	}
}
