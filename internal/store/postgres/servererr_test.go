package postgres

import (
	"errors"
	"fmt"
	"testing"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/jackc/pgx/v5/pgconn"
)

// The server's refusals get their classes; a full disk (which a test
// server cannot be made to have) is 507 NO_SPACE, not a 500.
func TestServerErr(t *testing.T) {
	tests := []struct {
		code  string
		class error
		wire  string
	}{
		{codeDiskFull, errdefs.ErrResourceExhausted, api.CodeNoSpace},
		{codeBadText, errdefs.ErrInvalidArgument, ""},
		{codeBadJSON, errdefs.ErrInvalidArgument, ""},
		{codeUnique, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.code, func(t *testing.T) {
			pe := &pgconn.PgError{Code: tt.code, Message: "could not extend file"}
			err := serverErr(fmt.Errorf("insert: %w", pe))
			class, _ := errdefs.Classify(err)
			if class != tt.class || errdefs.Code(err) != tt.wire {
				t.Errorf("serverErr(%s) = %v: class %v code %q, want %v %q", tt.code, err, class, errdefs.Code(err), tt.class, tt.wire)
			}
			if tt.class == nil && !errors.Is(err, pe) {
				t.Errorf("serverErr(%s) = %v, want the error as it was", tt.code, err)
			}
		})
	}
}
