package api

import "time"

// ResourceSpec is a template's resource limits (Kubernetes quantities).
type ResourceSpec struct {
	CPU    string `json:"cpu" yaml:"cpu"`
	Memory string `json:"memory" yaml:"memory"`
}

// FileSpec puts a file in place before a sandbox starts: Content inline,
// or Source, a URL or path the daemon reads.
type FileSpec struct {
	Source      string `json:"source,omitempty" yaml:"source,omitempty"`
	Destination string `json:"destination" yaml:"destination"`
	Content     string `json:"content,omitempty" yaml:"content,omitempty"`
}

// ExecAction is a command run inside the sandbox.
type ExecAction struct {
	Command []string `json:"command" yaml:"command"`
}

// ProbeSpec is a readiness probe: the sandbox is running once Exec exits 0.
type ProbeSpec struct {
	Exec                ExecAction `json:"exec" yaml:"exec"`
	InitialDelaySeconds int        `json:"initialDelaySeconds" yaml:"initialDelaySeconds"`
	PeriodSeconds       int        `json:"periodSeconds" yaml:"periodSeconds"`
	FailureThreshold    int        `json:"failureThreshold" yaml:"failureThreshold"`
}

// NetworkSpec is what a sandbox may reach beyond its own loopback.
type NetworkSpec struct {
	AllowInternetAccess bool     `json:"allowInternetAccess" yaml:"allowInternetAccess"`
	AllowedDomains      []string `json:"allowedDomains,omitempty" yaml:"allowedDomains,omitempty"`
}

// PersistenceSpec keeps a sandbox's writable storage (/workspace, /tmp,
// the home directory) on a volume of its own of Size: a
// PersistentVolumeClaim of StorageClassName on the kubernetes runtime, the
// sandbox's disk on the oci runtime (which has no storage classes).
// ReclaimPolicy Retain keeps the volume after the sandbox is deleted.
// Defaults when enabled: mode rootfs-overlay, size 1Gi, reclaimPolicy
// Delete.
type PersistenceSpec struct {
	Enabled          bool   `json:"enabled" yaml:"enabled"`
	Mode             string `json:"mode,omitempty" yaml:"mode,omitempty"`
	Size             string `json:"size,omitempty" yaml:"size,omitempty"`
	StorageClassName string `json:"storageClassName,omitempty" yaml:"storageClassName,omitempty"`
	ReclaimPolicy    string `json:"reclaimPolicy,omitempty" yaml:"reclaimPolicy,omitempty"`
}

// TemplateSpec is what a template makes: every field does what its name
// says. Defaults (as LiteBoxd's): resources 500m/512Mi, startupTimeout
// 300, probe periodSeconds 10 and failureThreshold 3. TTL has no default:
// 0 means sandboxes never expire.
type TemplateSpec struct {
	Image          string            `json:"image" yaml:"image"`
	Command        []string          `json:"command,omitempty" yaml:"command,omitempty"`
	Args           []string          `json:"args,omitempty" yaml:"args,omitempty"`
	Resources      ResourceSpec      `json:"resources" yaml:"resources"`
	TTL            int               `json:"ttl" yaml:"ttl"`
	Env            map[string]string `json:"env,omitempty" yaml:"env,omitempty"`
	StartupScript  string            `json:"startupScript,omitempty" yaml:"startupScript,omitempty"`
	StartupTimeout int               `json:"startupTimeout,omitempty" yaml:"startupTimeout,omitempty"`
	Files          []FileSpec        `json:"files,omitempty" yaml:"files,omitempty"`
	ReadinessProbe *ProbeSpec        `json:"readinessProbe,omitempty" yaml:"readinessProbe,omitempty"`
	Network        *NetworkSpec      `json:"network,omitempty" yaml:"network,omitempty"`
	Persistence    *PersistenceSpec  `json:"persistence,omitempty" yaml:"persistence,omitempty"`
	// RuntimeClassName runs the template's sandboxes under a Kubernetes
	// RuntimeClass (gVisor, Kata) on the kubernetes runtime; runtimes
	// that cannot choose one per sandbox refuse it (agent2env addition).
	RuntimeClassName string `json:"runtimeClassName,omitempty" yaml:"runtimeClassName,omitempty"`
}

// Template is a named, versioned sandbox recipe.
type Template struct {
	ID            string        `json:"id"`
	Name          string        `json:"name"`
	DisplayName   string        `json:"displayName"`
	Description   string        `json:"description"`
	Tags          []string      `json:"tags"`
	Author        string        `json:"author"`
	IsPublic      bool          `json:"isPublic"`
	LatestVersion int           `json:"latestVersion"`
	CreatedAt     time.Time     `json:"createdAt"`
	UpdatedAt     time.Time     `json:"updatedAt"`
	Spec          *TemplateSpec `json:"spec,omitempty"`
}

// TemplateVersion is one immutable version of a template.
type TemplateVersion struct {
	ID         string       `json:"id"`
	TemplateID string       `json:"templateId"`
	Version    int          `json:"version"`
	Spec       TemplateSpec `json:"spec"`
	Changelog  string       `json:"changelog"`
	CreatedBy  string       `json:"createdBy"`
	CreatedAt  time.Time    `json:"createdAt"`
}

// CreateTemplateRequest is the body of POST /templates.
type CreateTemplateRequest struct {
	Name        string       `json:"name"`
	DisplayName string       `json:"displayName,omitempty"`
	Description string       `json:"description,omitempty"`
	Tags        []string     `json:"tags,omitempty"`
	IsPublic    *bool        `json:"isPublic,omitempty"`
	Spec        TemplateSpec `json:"spec"`
	AutoPrepull bool         `json:"autoPrepull,omitempty"`
}

// UpdateTemplateRequest is the body of PUT /templates/{name}: it makes a
// new version with Spec. Empty DisplayName and Description keep the old
// values; nil (absent or null) Tags keep the old tags and an empty list
// clears them; nil IsPublic keeps the old value.
type UpdateTemplateRequest struct {
	DisplayName string       `json:"displayName,omitempty"`
	Description string       `json:"description,omitempty"`
	Tags        []string     `json:"tags"`
	IsPublic    *bool        `json:"isPublic,omitempty"`
	Spec        TemplateSpec `json:"spec"`
	Changelog   string       `json:"changelog,omitempty"`
}

// RollbackRequest is the body of POST /templates/{name}/rollback: a new
// version with the spec of TargetVersion.
type RollbackRequest struct {
	TargetVersion int    `json:"targetVersion"`
	Changelog     string `json:"changelog,omitempty"`
}

// TemplateList is the body of GET /templates.
type TemplateList struct {
	Items    []Template `json:"items"`
	Total    int        `json:"total"`
	Page     int        `json:"page"`
	PageSize int        `json:"pageSize"`
}

// VersionList is the body of GET /templates/{name}/versions.
type VersionList struct {
	Items []TemplateVersion `json:"items"`
	// Total is the number of versions listed: on this page, with a limit.
	Total int `json:"total"`
	// NextCursor, given as cursor, asks for the page after this one
	// (agent2env addition); it is absent on the last page.
	NextCursor string `json:"next_cursor,omitempty"`
}

// RollbackResponse is the body answering POST /templates/{name}/rollback.
type RollbackResponse struct {
	ID             string    `json:"id"`
	Name           string    `json:"name"`
	LatestVersion  int       `json:"latestVersion"`
	RolledBackFrom int       `json:"rolledBackFrom"`
	RolledBackTo   int       `json:"rolledBackTo"`
	UpdatedAt      time.Time `json:"updatedAt"`
}

// Import strategies and per-template outcomes.
const (
	StrategyCreateOnly     = "create-only"
	StrategyUpdateOnly     = "update-only"
	StrategyCreateOrUpdate = "create-or-update"

	ActionCreated = "created"
	ActionUpdated = "updated"
	ActionSkipped = "skipped"
	ActionFailed  = "failed"
)

// ImportResultItem is the outcome for one template of an import.
type ImportResultItem struct {
	Name    string `json:"name"`
	Action  string `json:"action"`
	Version int    `json:"version,omitempty"`
	Error   string `json:"error,omitempty"`
}

// ImportResult is the body answering POST /templates/import.
type ImportResult struct {
	Total          int                `json:"total"`
	Created        int                `json:"created"`
	Updated        int                `json:"updated"`
	Skipped        int                `json:"skipped"`
	Failed         int                `json:"failed"`
	Results        []ImportResultItem `json:"results"`
	PrepullStarted []string           `json:"prepullStarted,omitempty"`
}

// Prepull task statuses. pending and pulling are active: one active task
// per image at a time.
const (
	PrepullPending   = "pending"
	PrepullPulling   = "pulling"
	PrepullCompleted = "completed"
	PrepullFailed    = "failed"
)

// Prepull error codes (LiteBoxd's).
const (
	CodePrepullNotFound   = "PREPULL_NOT_FOUND"   // 404
	CodePrepullInProgress = "PREPULL_IN_PROGRESS" // 409
)

// PrepullProgress counts the image's layers fetched (Ready) of those it
// needs to fetch (Total); a built-in image being built counts as one. A
// completed task has Ready == Total >= 1. (LiteBoxd counts cluster nodes.)
type PrepullProgress struct {
	Ready int `json:"ready"`
	Total int `json:"total"`
}

// PrepullTask is an image being made available before sandboxes need it.
// Progress is always present, as in LiteBoxd; CompletedAt is set once the
// task is completed or failed.
type PrepullTask struct {
	ID          string          `json:"id"`
	Image       string          `json:"image"`
	Status      string          `json:"status"`
	Progress    PrepullProgress `json:"progress"`
	Template    string          `json:"template,omitempty"`
	Error       string          `json:"error,omitempty"`
	StartedAt   time.Time       `json:"startedAt"`
	CompletedAt *time.Time      `json:"completedAt,omitempty"`
}

// PrepullList is the body of GET /images/prepull: the tasks, or one page
// of them (agent2env addition: limit and cursor).
type PrepullList struct {
	Items []PrepullTask `json:"items"`
	// NextCursor, given as cursor, asks for the page after this one; it
	// is absent on the last page.
	NextCursor string `json:"next_cursor,omitempty"`
}

// PrepullRequest is the body of POST /images/prepull.
type PrepullRequest struct {
	// Image is required; surrounding whitespace is ignored.
	Image string `json:"image"`
	// Timeout in seconds (0: 600). agent2env honours it (LiteBoxd ignores
	// it): a pull still running then fails the task.
	Timeout int `json:"timeout,omitempty"`
}

// Error codes of the template API (LiteBoxd's).
const (
	CodeTemplateExists  = "TEMPLATE_EXISTS"   // 409
	CodeVersionNotFound = "VERSION_NOT_FOUND" // 404
	CodeInvalidYAML     = "INVALID_YAML"      // 400
)

// YAML documents of template import/export.
const (
	YAMLAPIVersion = "liteboxd/v1"
	KindTemplate   = "SandboxTemplate"
	KindList       = "SandboxTemplateList"
)
