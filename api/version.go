package api

// Version describes one build of agent2env: the daemon's answer to
// GET /api/v1/version, and what "agent2env version" prints of itself.
type Version struct {
	Version   string `json:"version"`
	Commit    string `json:"commit,omitempty"`
	GoVersion string `json:"goVersion,omitempty"`
	Platform  string `json:"platform,omitempty"`
}
