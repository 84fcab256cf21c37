package api

import "time"

// Image is a stored image (agent2env addition). The image list also
// holds the images being pulled or built and the built-in images not
// built yet: their Status says which, and their digest, id, size, layers
// and created are zero until they are stored.
type Image struct {
	Ref     string    `json:"ref"`
	Digest  string    `json:"digest"`
	ID      string    `json:"id"`
	Size    int64     `json:"size"`
	Layers  int       `json:"layers"`
	Created time.Time `json:"created"`
	// Status is the image's state; empty from a daemon that predates it,
	// which lists stored images only.
	Status ImageStatus `json:"status,omitempty"`
	// Progress is the last progress event of the pull or build in flight,
	// or of the one that failed.
	Progress *ImageProgress `json:"progress,omitempty"`
	// Started is when the pull or build in flight, or the one that failed,
	// began.
	Started *time.Time `json:"started,omitempty"`
	// Error is why the last pull or build failed (status failed).
	Error string `json:"error,omitempty"`
}

// ImageStatus is the state of an image in the image list.
type ImageStatus string

// Image states. A stored image that is being pulled again is pulling; one
// whose pull or build failed while it was not stored is failed until the
// next one succeeds.
const (
	ImageReady    ImageStatus = "ready"    // stored
	ImageMissing  ImageStatus = "missing"  // a built-in image not built yet
	ImageBuilding ImageStatus = "building" // a built-in image being built
	ImagePulling  ImageStatus = "pulling"  // being pulled from its registry
	ImageFailed   ImageStatus = "failed"   // its last pull or build failed; see Error
)

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
