package oci

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/agent2env/agent2env/internal/agent"
	"github.com/agent2env/agent2env/internal/sandbox"
)

// ociVersion is the runtime-spec version the bundles are written for: the
// oldest that has every field used here, so that older runtimes accept them.
const ociVersion = "1.0.2"

// The agent's inherited listening socket: runc passes ExtraFiles[0] as fd 3.
const agentListenFD = 3

// cpuPeriod is the CFS period; the quota is MilliCPU thousandths of it.
const cpuPeriod = 100_000

// maxNofile is the hard limit of open files in a sandbox.
const maxNofile = 65536

// shmBytes bounds /dev/shm; what is written there counts as the sandbox's
// memory too.
const shmBytes = 64 << 20

// agentCapabilities are what the agent needs and nothing more: file
// operations as the user (setfsuid: SETUID, SETGID; CHOWN, FOWNER), killing user
// process groups (KILL) and bringing up lo (NET_ADMIN, dropped right after).
// User commands run as uid 1000 and keep none of them.
var agentCapabilities = []string{
	"CAP_CHOWN", "CAP_FOWNER", "CAP_KILL",
	"CAP_SETUID", "CAP_SETGID", "CAP_NET_ADMIN",
}

// The paths runc masks and makes read-only by default.
var (
	maskedPaths = []string{
		"/proc/acpi", "/proc/asound", "/proc/interrupts", "/proc/kcore", "/proc/keys",
		"/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug",
		"/proc/scsi", "/sys/firmware", "/sys/devices/virtual/powercap",
	}
	readonlyPaths = []string{
		"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger",
	}
)

// bundleSpec returns the config.json of a sandbox whose disk is mounted at
// disk and root file system at rootfs, and whose agent starts with env.
func (r *Runtime) bundleSpec(spec *sandbox.Spec, env []string, res sandbox.Resources, disk, rootfs string) *specs.Spec {
	cwd := spec.Cwd
	if cwd == "" {
		cwd = sandbox.WorkDir
	}
	uid, gid := strconv.Itoa(sandbox.UserID), strconv.Itoa(sandbox.GroupID)
	quota := res.MilliCPU * cpuPeriod / 1000
	period := uint64(cpuPeriod)
	mem := res.MemoryBytes
	memory := &specs.LinuxMemory{Limit: &mem}
	if r.swapLimit {
		// Memory plus swap equal to memory: no swap at all.
		memory.Swap = &mem
	}
	args := []string{agentPath, "agent", "--uid", uid, "--gid", gid, "--cwd", cwd}
	if spec.SpareKernel != "" {
		args = append(args, "--spare-kernel", spec.SpareKernel)
	}
	userMount := []string{"rbind", "rw", "nosuid", "nodev"}
	s := &specs.Spec{
		Version: ociVersion,
		Process: &specs.Process{
			User: specs.User{UID: 0, GID: 0},
			Args: args,
			Env:  append(slices.Clone(env), agent.EnvListenFD+"="+strconv.Itoa(agentListenFD)),
			Cwd:  "/",
			Capabilities: &specs.LinuxCapabilities{
				Bounding:  agentCapabilities,
				Effective: agentCapabilities,
				Permitted: agentCapabilities,
			},
			Rlimits: []specs.POSIXRlimit{
				// Go raises the soft limit to the hard one for the agent and
				// restores it for the commands the agent starts.
				{Type: "RLIMIT_NOFILE", Soft: min(1024, r.nofile), Hard: r.nofile},
			},
			NoNewPrivileges: true,
		},
		Root:     &specs.Root{Path: rootfs, Readonly: true},
		Hostname: spec.ID,
		Mounts: []specs.Mount{
			{Destination: "/proc", Type: "proc", Source: "proc", Options: []string{"nosuid", "noexec", "nodev"}},
			{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
			{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"}},
			{Destination: "/dev/shm", Type: "tmpfs", Source: "shm", Options: []string{"nosuid", "noexec", "nodev", "mode=1777", "size=" + strconv.Itoa(shmBytes)}},
			{Destination: "/dev/mqueue", Type: "mqueue", Source: "mqueue", Options: []string{"nosuid", "noexec", "nodev"}},
			{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "noexec", "nodev", "ro"}},
			{Destination: "/sys/fs/cgroup", Type: "cgroup", Source: "cgroup", Options: []string{"nosuid", "noexec", "nodev", "relatime", "ro"}},
			{Destination: agentPath, Type: "bind", Source: filepath.Join(r.dir(spec.ID), fileAgent), Options: []string{"bind", "ro", "nosuid", "nodev"}},
			{Destination: sandbox.WorkDir, Type: "bind", Source: filepath.Join(disk, diskWorkspace), Options: userMount},
			{Destination: "/tmp", Type: "bind", Source: filepath.Join(disk, diskTmp), Options: userMount},
			{Destination: sandbox.HomeDir, Type: "bind", Source: filepath.Join(disk, diskHome), Options: userMount},
		},
		Linux: &specs.Linux{
			Namespaces: []specs.LinuxNamespace{
				{Type: specs.PIDNamespace}, {Type: specs.MountNamespace}, {Type: specs.NetworkNamespace},
				{Type: specs.IPCNamespace}, {Type: specs.UTSNamespace}, {Type: specs.CgroupNamespace},
			},
			CgroupsPath: r.cgroups.path(spec.ID),
			Resources: &specs.LinuxResources{
				Devices: []specs.LinuxDeviceCgroup{{Allow: false, Access: "rwm"}},
				Memory:  memory,
				CPU:     &specs.LinuxCPU{Quota: &quota, Period: &period},
				Pids:    &specs.LinuxPids{Limit: &res.Pids},
			},
			MaskedPaths:   maskedPaths,
			ReadonlyPaths: readonlyPaths,
		},
	}
	for _, m := range spec.Mounts { // checked by validate
		opts := []string{"rbind", "rw", "nosuid", "nodev"}
		if m.ReadOnly {
			opts[1] = "ro"
		}
		s.Mounts = append(s.Mounts, specs.Mount{Destination: m.Destination, Type: "bind", Source: m.Source, Options: opts})
	}
	if spec.Network.Egress != nil {
		// The agent forwards the sandbox's proxy address to the socket in
		// this root-only directory; user commands cannot open it.
		s.Mounts = append(s.Mounts, specs.Mount{
			Destination: egressMount, Type: "bind", Source: filepath.Join(r.dir(spec.ID), dirEgress),
			Options: []string{"bind", "ro", "nosuid", "nodev", "noexec"},
		})
		s.Process.Env = append(s.Process.Env, agent.EnvEgress+"="+egressMount+"/"+fileEgressSock)
	}
	if r.cfg.Services != nil {
		// The same for the daemon's services, which every sandbox gets.
		s.Mounts = append(s.Mounts, specs.Mount{
			Destination: servicesMount, Type: "bind", Source: filepath.Join(r.dir(spec.ID), dirServices),
			Options: []string{"bind", "ro", "nosuid", "nodev", "noexec"},
		})
		s.Process.Env = append(s.Process.Env, agent.EnvServices+"="+servicesMount+"/"+fileServicesSock)
	}
	if r.cfg.CRIU != "" {
		// The daemon makes the network namespace (checkpoint.go), and
		// the runtime hands CRIU the options Checkpoint and Restore write.
		dir := r.dir(spec.ID)
		for i := range s.Linux.Namespaces {
			if s.Linux.Namespaces[i].Type == specs.NetworkNamespace {
				s.Linux.Namespaces[i].Path = filepath.Join(dir, fileNetns)
			}
		}
		if r.oci.annotateCRIU() {
			s.Annotations = map[string]string{criuConfigAnnotation: filepath.Join(dir, fileCRIUConf)}
		}
	}
	if r.oomAdjust {
		// The OOM killer never picks the agent; lowering the score needs
		// CAP_SYS_RESOURCE, without it the agent keeps the daemon's.
		s.Process.OOMScoreAdj = ptr(-1000)
	}
	return s
}

// processEnv is the agent's environment, which its commands inherit: the
// image's environment and the spec's merged by sandbox.Environ, less the
// variables that configure the agent.
func processEnv(imageEnv, env []string) []string {
	return slices.DeleteFunc(sandbox.Environ(imageEnv, env), func(kv string) bool {
		return strings.HasPrefix(kv, "AGENT2ENV_AGENT_")
	})
}

// writeJSONFile writes v to path atomically: it appears whole or not at all.
func writeJSONFile(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func readJSONFile(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

func ptr[T any](v T) *T { return &v }
