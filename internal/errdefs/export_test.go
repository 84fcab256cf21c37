package errdefs

// Classes lists the classes of the table, for tests that must cover each.
func Classes() []error {
	out := make([]error, len(classes))
	for i, c := range classes {
		out[i] = c.class
	}
	return out
}
