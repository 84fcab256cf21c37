package api

import "time"

// Image is a stored image (agent2env addition).
type Image struct {
	Ref     string    `json:"ref"`
	Digest  string    `json:"digest"`
	ID      string    `json:"id"`
	Size    int64     `json:"size"`
	Layers  int       `json:"layers"`
	Created time.Time `json:"created"`
}

// ImageRequest is the body of POST /images/pull and /images/build.
type ImageRequest struct {
	Ref string `json:"ref"`
}

// ImageProgress is one "progress" event of an image pull, build or import
// stream; the stream ends with "image" events or an "error" event.
type ImageProgress struct {
	Phase   string `json:"phase"`
	Item    string `json:"item,omitempty"`
	Current int64  `json:"current,omitempty"`
	Total   int64  `json:"total,omitempty"`
}
