// Package oci runs sandboxes as OCI containers with an OCI runtime binary
// (runc by default, crun or gVisor's runsc by choice), without a container
// engine: it writes the bundles itself and owns each sandbox's disk, root
// file system and cgroup.
//
// A sandbox lives in a directory under Config.Root named by its id:
//
//	disk.img     sparse ext4 image: the sandbox's whole writable storage
//	d/           disk.img mounted through a loop device (autoclear)
//	  upper/ work/   overlay upper and work dirs
//	  workspace/ home/ tmp/   bind-mounted at /workspace, $HOME, /tmp
//	r/           overlay root file system: image layers + d/upper
//	config.json  the OCI bundle's config (the bundle dir is the sandbox dir)
//	meta.json    labels and creation time; written last, it marks the
//	             sandbox complete (Recover removes dirs without it)
//	agent.sock   the agent's listening socket, made on the host
//	agent.log    the agent's (and the runtime binary's) output
//	agent.pid    host pid and start time of the agent
//	agent        the agent binary the sandbox runs: a link to the copy in
//	             Root/_agents of the daemon's that made or last started it,
//	             which an upgrade of the daemon in place leaves (agentcopy.go)
//	egress/      only with egress, mode 0700: proxy.sock, the daemon's
//	             egress proxy for this sandbox
//	svc/         with Config.Services, mode 0700: daemon.sock, the
//	             daemon's services for this sandbox
//
// # Disk
//
// One ext4 image per sandbox gives a hard size limit shared by the upper
// layer, /workspace, /tmp and the home directory: filling it ends in ENOSPC
// in that sandbox and nowhere else. Making the file system with mkfs.ext4
// costs about 4 ms and an exec per sandbox; instead one template image per
// size is made once (no journal, no reserved blocks, the directories above
// already in place with their owners), and each sandbox gets a copy of the
// template's few hundred KiB of data extents (SEEK_DATA/SEEK_HOLE and
// copy_file_range) in a sparse file, well under a millisecond. The copies
// share the template's file-system UUID, which ext4 does not mind. The image
// is attached with LOOP_CONFIGURE and LO_FLAGS_AUTOCLEAR, so unmounting it
// detaches the loop device; concurrent attaches take distinct devices
// (disk.go). Config.Root is marked a top directory (FS_TOPDIR_FL) so that
// ext4 spreads the sandbox directories over its block groups.
//
// A spec's Persistence sizes the disk instead of Resources.DiskBytes (up to
// the size of Root's file system); with Retain, Delete moves the unmounted
// image to Root/_retained/<id>.img, which nothing here reads again
// (retain.go). There are no storage classes, and the one RuntimeBinary runs
// every sandbox: specs naming a storage or runtime class are refused
// (Capabilities), not mapped, as a class name says nothing certain about
// which binary it means.
//
// Disks are thin by default: a sparse image takes room on Root's file
// system only as its sandbox writes, so the disks may add up to more than
// the file system, and when it fills the sandboxes' writes fail under
// them (the loop device's; README, "When the data dir's file system
// fills up"). With Config.ThickDisks (serve --disk-provisioning thick)
// every disk is allocated whole when it is made, by Create and Restore
// (so a fork), and a disk made thin before, when its sandbox starts
// (allocateDisk): fallocate's unwritten extents, no data written; blocks
// a reflink shares with the template or snapshot are unshared. A disk
// that does not fit with Config.DiskReserve left free is refused with
// errdefs.NoSpace, and the create or restore removes what it made.
// Allocations are serialized, so their checks of the free space add up.
// What thick cannot keep: the loop device passes discards (a host's
// FITRIM of the mounted disk) and zeroing without unmap (ext4 zeroing a
// range of a file the sandbox preallocated) to the image as punched
// holes, which the sandbox's next start allocates again. A file system
// that writes overwrites elsewhere (btrfs, zfs) is refused at New.
//
// # Startup
//
// Start creates the agent's listening unix socket on the host and runs
// the runtime binary's `run --detach --preserve-fds 1` with the socket as
// the container's fd 3: one exec of the runtime binary per start (not
// create + start). Since
// the socket listens before the agent runs, the first Info call simply
// waits in the backlog until the agent answers, without polling. The socket
// never appears inside the sandbox, and after a daemon restart a new client
// reaches the agent by the same path.
//
// Most of create → ready is `runc run` itself (docs/PERFORMANCE.md has the
// breakdown): three starts of a Go binary (runc, runc init twice), the
// namespaces and mounts, and the move into the cgroups,
// whose first write waits one RCU grace period (6-20 ms) of the kernel's
// cgroup_threadgroup_rwsem. Start overlaps that wait with runc's own start
// by moving the daemon into its own cgroup as runc starts (warmAttach): the
// kernel lets writers within a grace period of each other through without
// waiting again.
//
// crun starts the same bundle without the Go starts, in about half the
// CPU time. It is the daemon's default when make crun has built the
// project's (scripts/crun.sh: crun 1.21 with CRIU; `serve --runtime auto`),
// and runc otherwise. A stock crun refuses to start a container on a
// hybrid host whose cgroup2 (/sys/fs/cgroup/unified) holds a controller
// ("cgroups in hybrid mode not supported"); the project's is patched to run
// there as it does on a hybrid host with an empty cgroup2, and as runc
// does: it makes and limits the sandbox's v1 cgroups (cpu, memory, pids,
// devices, freezer) and puts the sandbox in a cgroup2 cgroup of its own,
// without limits (hugetlb, the only controller there on the hosts seen, is
// limited by neither runtime). On pure v1 and pure v2 hosts crun runs
// as it is and manages the cgroups itself. The conformance suite runs with
// both binaries (TestConformance). A crun without CRIU (+CRIU missing
// from `crun --version`, as with Debian 12's 1.8.1) gets no Checkpoint
// capability. Either binary runs from a sealed copy in memory that the
// runtime makes once (ociCLI.runFromMemory): both defend against a
// container overwriting the host's binary by running from such a copy,
// and otherwise make one themselves on every command.
//
// Stop and Delete signal the agent through a pidfd rather than with
// `runc kill`: no exec, no pid reuse, and no 100 ms polling step as in
// `runc delete --force`. When the agent, the pid namespace's init, is gone,
// the kernel has killed every other process of the sandbox.
//
// # Egress
//
// A sandbox never gets a network interface. When its spec sets
// Network.Egress, Start makes egress/proxy.sock and serves Config.Egress
// (the daemon's netproxy) on it with the sandbox's policy: one socket per
// sandbox tells the proxy whose connection it has without believing
// anything the sandbox sends. The bundle bind-mounts the directory,
// read-only and root-only, at /.agent2env/egress and names the socket to
// the agent (agent.EnvEgress), which forwards the sandbox's 127.0.0.1:3128
// to it and points commands there with HTTP_PROXY and HTTPS_PROXY. The
// directory is mounted rather than the socket so that the socket Recover
// makes after a daemon restart, a new inode, is what the running sandbox
// sees. Stop and Delete stop serving; the policy is kept in meta.json.
//
// The daemon's services (Config.Services: the LLM proxy and MCP) reach
// every sandbox the same way, whatever its network: svc/daemon.sock,
// mounted at /.agent2env/services (agent.EnvServices), forwarded by the
// agent from the sandbox's 127.0.0.1:4000. The socket is the sandbox's
// identity: the daemon serves each with a handler that knows its id.
//
// # Checkpoint and restore
//
// With Config.CRIU (the criu that scripts/criu.sh builds: CRIU 4.1.1 from
// Debian's source with five patches, see there) a running sandbox is
// saved whole by `runc checkpoint` or `crun checkpoint` and new sandboxes
// are made from the save by `runc restore` or `crun restore`
// (checkpoint.go, sandbox.Checkpointer). A snapshot
// dir holds CRIU's images (images/), a copy of the sandbox's disk.img (its
// writable layer, /workspace, /tmp and the home directory), and
// snapshot.json: the sandbox's metadata and bundle config, and what
// Restore must hand CRIU. What it took, each found by a failing dump or
// restore:
//   - The agent's listening socket must belong to the sandbox's network
//     namespace: CRIU looks sockets up with sock_diag in the namespaces it
//     dumps, and one made in the daemon's is "not found". So the daemon
//     makes each sandbox's namespace itself (unshare on a thread of its own,
//     lo up, kept by a bind mount at <id>/netns, given to runc by path,
//     which makes runc mark it external to CRIU) and makes the listener
//     from within it. The thread then moves back: Go never ends its main
//     thread, and a main thread left in a sandbox's namespace makes the
//     daemon's /proc/self/net that sandbox's.
//   - The daemon's connections to the agent must be closed before the
//     dump: the kernel makes the accepting end of a unix connection in the
//     connecting end's namespace (the host's), where CRIU does not find
//     it. Checkpoint closes the idle ones and waits until the agent holds
//     no socket of the host's namespace; a request in flight (an attached
//     terminal, a streaming command) makes it fail after 5 s. A paused
//     sandbox is thawed for that moment (its agent must close them), then
//     saved paused and left so.
//   - Restore gives the restored agent a new listener (a new namespace, a
//     new path) with CRIU's --inherit-fd socket:[<old inode>], and its
//     stdio, host files outside the sandbox's mounts, with --external
//     file[mnt_id:inode] on dump and --inherit-fd on restore. Neither
//     runtime has flags for either: they go in a CRIU configuration file,
//     and the files reach CRIU's swrk process as fds 10 and up, which
//     both leave open. runc hands CRIU the file the bundle names in the
//     org.criu.config annotation, which CRIU parses twice in RPC mode, so
//     each inherit-fd was added twice and the second failed ("Can't send
//     fd 10 into store"): patch 0003. crun (1.21, with the libcriu of CRIU
//     4.1) has no such annotation: its CRIU reads the file named by
//     $CRIU_CONFIG_FILE, before the options crun sends, which undo the
//     booleans of the file (tcp-established, file-locks), so those are
//     flags of both runtimes' commands instead (criuFlags). crun runs the
//     criu on its PATH through the libcriu.so.2 on LD_LIBRARY_PATH: the
//     daemon puts the project's first (scripts/criu.sh installs the
//     library beside criu), and makes the work directory crun expects.
//   - Root on this project's machines lacks CAP_SYS_RESOURCE, without
//     which prlimit() refuses to read another user's limits, and the dump of
//     every sandbox (user commands run as uid 1000) failed with "Can't get
//     rlimit 0": patch 0002 reads /proc/<pid>/limits instead.
//   - Kernels >= 6.16 refuse SO_PASSCRED on TCP sockets, and Debian 12's
//     CRIU 3.17 fails `criu check` on 6.x kernels: 4.1.1 plus upstream's
//     fix (patch 0001).
//   - What CRIU ran besides itself took half of a small sandbox's dump and
//     restore: the network lock by iptables (five processes to unlock) and
//     tar with gzip for each of the sandbox's five tmpfs mounts. The
//     project's CRIU locks with nftables in process and saves an empty
//     tmpfs without tar and the others without gzip (patch 0005).
//   - The disk is copied (sparse, copy_file_range) while the sandbox is
//     frozen by its freezer, after a syncfs, so files and memory agree;
//     CRIU, finding the cgroup frozen, leaves it so, and Checkpoint thaws it
//     (live) or runc ends the container (stop).
//   - The agent's seccomp filter, no_new_privs and capabilities, the
//     processes' memory, pipes, ptys and loopback sockets are CRIU's own
//     business and come back as they were. CRIU restores the UTS namespace
//     with the snapshot's hostname, which Restore then sets to the new
//     sandbox's id (setns from a thread of its own, ended after).
//   - The forwards of the daemon's services and egress proxy (the agent
//     listens on the sandbox's 127.0.0.1:4000 and :3128 and makes one unix
//     connection to svc/daemon.sock or egress/proxy.sock per connection it
//     accepts) hold nothing at rest: their listeners are the sandbox's and
//     plain TCP (Go's default multipath TCP is "Unsupported proto 262" to
//     CRIU). A connection open through them has its daemon end in the
//     sandbox's namespace, held by the daemon, which CRIU cannot dump:
//     when there is one, Checkpoint parks the sandbox's sockets (stops
//     serving them, which ends every connection through them: a client in
//     the sandbox, e.g. an HTTP client keeping its connection to
//     127.0.0.1:4000 alive, sees it reset, as in a network blip, and one
//     that connects meanwhile is refused), dumps, and serves them again
//     before the sandbox thaws. Restore serves the new sandbox's sockets
//     before runc runs, and the restored forwards dial them (the bundle
//     mounts the new sandbox's directories).
//   - CRIU probes the kernel at the start of every run (kerndat: 100-150
//     ms on 2 loaded cores) unless it finds its cache, criu.kdat, which it
//     keeps only on a tmpfs (a reboot must clear it) and looks for in /run.
//     Where /run is not a tmpfs (this project's machines), the runtime
//     mounts a 1 MB tmpfs at /run/agent2env-criu, shared by the host's
//     daemons and left mounted, and names it to CRIU in $CRIU_KDAT_DIR
//     (patch 0004), which runc passes on: one probe per boot instead of one
//     per dump and per restore.
//
// A fork (manager.Fork) is several restores of one snapshot at once, each
// its own sandbox: a network namespace, listener, cgroup and hostname of
// its own and a copy of the snapshot's disk image (its writable layer).
// That copy is copySparse's copy_file_range over the image's data extents,
// which the kernel makes a reflink (shared extents, copy-on-write) where
// the data dir's file system has them (xfs, btrfs) and a copy of the data
// elsewhere (ext4). Measured (2 cores, load 9-14): copy_file_range of 300
// MB on xfs with reflink=1 0.2 ms and no space taken; an image holding
// 165 MB, cp --reflink=always 10-23 ms on xfs against a sparse data copy
// 95-163 ms on xfs and 115-178 ms on ext4 (this machine's data dir). A
// fresh agent2env/python sandbox's image holds 0.7 MB (go run
// ./internal/bench -snapshot-only). Overlay stacking does not apply: the
// writable layer is an ext4 image (the disk's hard limit), not a
// directory. Memory is not shared: CRIU restores every page into each
// copy.
//
// Checkpoint and restore work with runc and with a crun built with CRIU
// (both in the checkpoint tests); runsc is not tried. CRIU's images of one
// binary do not restore with the other (each marks the bundle's mounts
// external under its own keys), so a snapshot records the binary that took
// it and restores with it, and a sandbox's meta.json the binary that runs
// it (a restored copy, or one made before --runtime changed, is
// checkpointed with that one; Start moves a stopped one to the runtime's
// own); any binary's state of a deleted sandbox is removed
// (TestSwitchBinary).
//
// Figures (runc; BenchmarkCheckpointRestore beside BenchmarkCreateStart in
// the same run, 2 cores shared with other builds; busybox image, one shell
// process): at load average 8-9, live checkpoint p50 206 ms and restore to
// an answering agent p50 197 ms, 3.9 and 3.7 times create+start (53 ms); at
// load 15-23, 594-802 ms and 665-682 ms, 2.4-2.9 times create+start. Nearly
// all of it is runc and CRIU (the dump with the sandbox frozen; runc
// restore): the daemon's part is 1-50 ms and the restored agent answers 1-2
// ms after runc returns. A Python process holding 50 MB (load 11):
// checkpoint 325 ms, restore 463 ms; 8 restores of one snapshot at once:
// 1.3 s wall. The figures on a quiet machine (runc + CRIU 4.1) were
// 180-260 ms and 143 ms.
//
// # Isolation
//
// The agent runs as root with six capabilities (see agentCapabilities),
// no_new_privs and oom_score_adj -1000 (when the daemon has
// CAP_SYS_RESOURCE); the bundle has no seccomp profile, for the agent
// installs the sandbox's filter on itself as it starts (package seccomp);
// it runs user commands as uid 1000 with no capabilities. The root file
// system is read-only except /workspace, /tmp and the home directory. The
// sandbox has its own pid, mount, network (loopback only), ipc, uts and
// cgroup namespaces and the cgroup /agent2env/<root hash>/<id> with cpu,
// memory (without swap, where the host accounts swap) and pids limits; both
// cgroup v1 and v2 hosts work. The hash of Root in the path keeps runtimes
// on different roots (two daemons, a daemon and tests) out of each other's
// way: Recover removes stray cgroups of its own root only. What the pids
// limits do not bound, the host's process ids shared by all sandboxes,
// CheckHost does: a sandbox that would leave the host too few is refused
// before it is made (hostpids.go).
//
// Status is read from the agent's pid and start time rather than by running
// `runc state`, so listing hundreds of sandboxes costs no exec.
//
// New makes the daemon a child subreaper, so that agents, whose parent the
// runtime binary was, become its children and their exit is reaped. The
// runtime binary's own helpers become its children too: crun leaves one
// zombie per container, which a reap scheduled by each crun command
// collects shortly after, off the command's path (orphans.go), never an
// exit os/exec waits for; runc waits for its own.
package oci
