package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/store/postgres/pgtest"
)

// benchStoreOnly starts a daemon on the SQLite store and measures the
// PostgreSQL store against it (benchStore).
func benchStoreOnly(n int, img string) error {
	bin, d, err := startFirst()
	if err != nil {
		return err
	}
	defer d.stop()
	return benchStore(bin, d, n, img)
}

// benchStore measures create → ready, exec `true` and run_code print(1)
// through a daemon on the PostgreSQL store against the same through d, a
// daemon on the SQLite store, in turns iteration by iteration (who goes
// first alternates), so that the machine's drift hits both alike. The
// PostgreSQL server is a throwaway one on this machine (pgtest: a unix
// socket, fsync off; SQLite's WAL does not sync a commit either).
func benchStore(bin string, d *daemon, n int, img string) error {
	const name = "PostgreSQL store vs SQLite"
	ctx := context.Background()
	srv, err := pgtest.Start(ctx)
	if errors.Is(err, pgtest.ErrNotInstalled) {
		fmt.Printf("%-34s not measured: %v\n", name, err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("start PostgreSQL: %w", err)
	}
	defer srv.Stop()
	_, dbURL, err := srv.CreateDatabase(ctx)
	if err != nil {
		return err
	}
	pg, err := startDaemon(bin, "--store", dbURL)
	if err != nil {
		return fmt.Errorf("daemon on PostgreSQL: %w", err)
	}
	defer pg.stop()
	both := [2]*daemon{pg, d}
	for _, dd := range both { // the first create may import the image
		id, err := dd.create(img)
		if err != nil {
			return err
		}
		if err := dd.delete(id); err != nil {
			return err
		}
	}

	var sandboxes [2][]string
	defer func() {
		for i, dd := range both {
			dd.deleteAll(sandboxes[i])
		}
	}()
	// Creates 100 ms apart, as -vs times them: one create's moves into its
	// cgroups must not spare the next one the kernel's wait (oci's
	// warmAttach), which would favour whichever daemon goes second.
	create, err := inTurns(n, 100*time.Millisecond, func(i int) error {
		id, err := both[i].create(img)
		if err == nil {
			sandboxes[i] = append(sandboxes[i], id)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("create: %w", err)
	}
	report("create → ready (PostgreSQL)", create[0], "SQLite store", create[1], "≤ 1.3× p50")

	exec, err := inTurns(n*4, 0, func(i int) error { return both[i].execTrue(sandboxes[i][0]) })
	if err != nil {
		return fmt.Errorf("exec: %w", err)
	}
	report("exec `true` (PostgreSQL)", exec[0], "SQLite store", exec[1], "≤ 1.3× p50")

	var contexts [2]string
	for i, dd := range both {
		var c api.Context
		if err := dd.post("/api/v1/sandboxes/"+sandboxes[i][0]+"/contexts", api.CreateContextRequest{Language: "python"}, &c); err != nil {
			return err
		}
		contexts[i] = c.ContextID
	}
	code, err := inTurns(n*4, 0, func(i int) error { return both[i].printOne(contexts[i]) })
	if err != nil {
		return fmt.Errorf("run_code: %w", err)
	}
	report("run_code print(1) (PostgreSQL)", code[0], "SQLite store", code[1], "≤ 1.3× p50")
	return nil
}

// inTurns times fn(0) and fn(1) n times each, taking turns, the first of
// each pair alternating, each call gap after the one before; it returns
// the figures of each.
func inTurns(n int, gap time.Duration, fn func(i int) error) ([2]stats, error) {
	var ds [2][]time.Duration
	for k := range n {
		for _, i := range [2]int{k % 2, 1 - k%2} {
			time.Sleep(gap)
			start := time.Now()
			if err := fn(i); err != nil {
				return [2]stats{}, err
			}
			ds[i] = append(ds[i], time.Since(start))
		}
	}
	return [2]stats{summarize(ds[0]), summarize(ds[1])}, nil
}
