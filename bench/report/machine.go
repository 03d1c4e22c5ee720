package report

import (
	"bufio"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Machine is what ran the benchmarks.
type Machine struct {
	CPU        string // model name
	CPUs       int
	GOMAXPROCS int
	Kernel     string // uname release and version
	FileSystem string // type of the file system holding the scratch directory
	Go         string
	OS, Arch   string
}

// Version is one module's version in the running binary.
type Version struct {
	Path, Version string
}

// DescribeMachine describes this machine; scratch is a directory on the
// file system the benchmarks write to.
func DescribeMachine(scratch string) Machine {
	m := Machine{CPU: "unknown", CPUs: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0),
		Go: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH, Kernel: "unknown", FileSystem: "unknown"}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		m.Kernel = unix.ByteSliceToString(u.Release[:]) + " " + unix.ByteSliceToString(u.Version[:])
	}
	var st unix.Statfs_t
	if unix.Statfs(scratch, &st) == nil {
		m.FileSystem = fsName(st.Type)
	}
	return m
}

// fsName names the common Linux file-system magic numbers.
func fsName(magic int64) string {
	switch magic {
	case unix.EXT4_SUPER_MAGIC:
		return "ext4 (or ext2/ext3)"
	case unix.XFS_SUPER_MAGIC:
		return "xfs"
	case unix.BTRFS_SUPER_MAGIC:
		return "btrfs"
	case unix.TMPFS_MAGIC:
		return "tmpfs (memory: fdatasync costs nothing; not a disk measurement)"
	case unix.OVERLAYFS_SUPER_MAGIC:
		return "overlayfs"
	}
	return "magic 0x" + strconv.FormatUint(uint64(magic), 16)
}

// ModuleVersions returns the versions of the given module paths as built
// into this binary (the main module reports "(devel)").
func ModuleVersions(paths ...string) []Version {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return nil
	}
	have := map[string]string{bi.Main.Path: bi.Main.Version}
	for _, d := range bi.Deps {
		v := d.Version
		if d.Replace != nil {
			v = "replaced by " + d.Replace.Path
			if d.Replace.Version != "" {
				v += " " + d.Replace.Version
			}
		}
		have[d.Path] = v
	}
	out := make([]Version, 0, len(paths))
	for _, p := range paths {
		v, ok := have[p]
		if !ok {
			v = "not linked"
		}
		out = append(out, Version{Path: p, Version: v})
	}
	return out
}
