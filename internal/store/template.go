package store

// Templates keeps templates and their immutable versions.
type Templates interface {
}
