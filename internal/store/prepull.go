package store

// Prepulls keeps image prepull tasks.
type Prepulls interface {
}
