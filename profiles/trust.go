package profiles

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/durable-pi/subagents/internal/errcode"
)

// trustPolicy says whose writing the worker accepts in what a child loads
// or reads into its prompt: a child runs as the service's user, so a file
// another local user could have written (a profile in a folder they own,
// an extension beside it) would run their code as that user. Root's files
// are accepted (root can do anything anyway); a group's write access only
// where the settings name that group, or where the group is the user's own
// private group (Debian's and Ubuntu's umask 002 makes every file
// group-writable by it, and nobody else is in it).
type trustPolicy struct {
	uid  uint32
	user string
	// groups are the gids whose write access is accepted, by name.
	groups map[uint32]string
	// settingsFile is where trustGroup is set, for the messages.
	settingsFile string
	// refuses says, in the messages, what the policy keeps out ("" for
	// the files a child loads).
	refuses string
}

func (p trustPolicy) refusal() string {
	if p.refuses != "" {
		return p.refuses
	}
	return "the worker runs no profile, extension, skill or prompt file another user could have written"
}

func newTrustPolicy(cfg Config, agentDir string) trustPolicy {
	p := trustPolicy{uid: uint32(os.Geteuid()), user: strconv.Itoa(os.Geteuid()), groups: map[uint32]string{}}
	p.settingsFile = ConfigFile
	if agentDir != "" {
		p.settingsFile = filepath.Join(agentDir, ConfigFile)
	}
	if u, err := user.LookupId(p.user); err == nil {
		p.user = u.Username
		if gid, ok := privateGroup(u); ok {
			p.groups[gid] = u.Username
		}
	}
	if cfg.TrustGroup != "" {
		if g, err := user.LookupGroup(cfg.TrustGroup); err == nil {
			if gid, err := strconv.ParseUint(g.Gid, 10, 32); err == nil {
				p.groups[uint32(gid)] = g.Name
			}
		}
	}
	return p
}

// privateGroup is u's primary group when it is u's alone: named as u, with
// no other member listed in /etc/group. A group /etc/group does not list
// (a directory service's) is not taken for private.
func privateGroup(u *user.User) (uint32, bool) {
	g, err := user.LookupGroupId(u.Gid)
	if err != nil || g.Name != u.Username {
		return 0, false
	}
	f, err := os.Open("/etc/group")
	if err != nil {
		return 0, false
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Split(sc.Text(), ":")
		if len(fields) != 4 || fields[2] != u.Gid {
			continue
		}
		for _, m := range strings.Split(fields[3], ",") {
			if m != "" && m != u.Username {
				return 0, false
			}
		}
		gid, err := strconv.ParseUint(u.Gid, 10, 32)
		return uint32(gid), err == nil
	}
	return 0, false
}

// check refuses path, named as what, when another user could have written
// it or could swap it before pi opens it: path itself and every folder
// above it, as named and as its links resolve, must be owned by the
// service's user or root and writable by no one else. A folder writable by
// others with the sticky bit (/tmp) is fine above an entry that exists, as
// others cannot rename or remove what they do not own there; above a
// missing one it is not, as they could create it.
func (p trustPolicy) check(what, path string) error {
	path = filepath.Clean(path)
	chains := [][]string{ancestors(path)}
	real, err := filepath.EvalSymlinks(path)
	if err == nil && real != path {
		chains = append(chains, ancestors(real))
	}
	// A link whose target is missing passes no check of that target, and
	// another user could create it (in /tmp, say) before pi opens it.
	if li, lerr := os.Lstat(path); lerr == nil && li.Mode()&fs.ModeSymlink != 0 && err != nil {
		return errcode.Errorf(errcode.PermissionDenied, "Permission denied: %s: %s is a link whose target cannot be resolved (%v): refusing to load it", what, path, err)
	}
	for _, chain := range chains {
		below := false // whether the entry below the one looked at exists
		for i, q := range chain {
			info, err := os.Stat(q)
			if errors.Is(err, fs.ErrNotExist) {
				below = false
				continue
			}
			if err != nil {
				return errcode.Errorf(errcode.PermissionDenied, "Permission denied: %s: cannot tell who may change %s: %v", what, q, err)
			}
			if err := p.allows(what, q, info, i > 0 && below); err != nil {
				return err
			}
			below = true
		}
	}
	return nil
}

// CheckFolder refuses, with PERMISSION_DENIED naming what, a folder that
// another local user owns or could change or replace (it, or a folder
// above it, is theirs or writable by them), as check does for a file a
// child loads: a child run there unattended would work among their files
// and read their AGENTS.md.
func CheckFolder(cfg Config, agentDir, what, dir string) error {
	p := newTrustPolicy(cfg, agentDir)
	p.refuses = "the worker runs no child unattended in a folder another user could have made or changed"
	return p.check(what, dir)
}

// ancestors are path and every folder above it, path first.
func ancestors(path string) []string {
	out := []string{path}
	for d := filepath.Dir(path); d != out[len(out)-1]; d = filepath.Dir(d) {
		out = append(out, d)
	}
	return out
}

// allows checks one file or folder q on the way to what; sticky says
// whether a sticky folder's write bits for others are harmless here.
func (p trustPolicy) allows(what, q string, info fs.FileInfo, sticky bool) error {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	mode := info.Mode()
	perm := fmt.Sprintf("%04o", mode.Perm())
	if mode&fs.ModeSticky != 0 {
		perm = fmt.Sprintf("%04o", mode.Perm()|0o1000)
	}
	sticky = sticky && info.IsDir() && mode&fs.ModeSticky != 0
	switch {
	case st.Uid != p.uid && st.Uid != 0:
		return errcode.Errorf(errcode.PermissionDenied,
			"Permission denied: %s: %s is owned by %s (mode %s), not by %s, who runs the subagents worker; %s. If it is yours, `chown %s %s`; if not, do not run it",
			what, q, ownerName(st.Uid), perm, p.user, p.refusal(), p.user, q)
	case mode.Perm()&0o002 != 0 && !sticky:
		return errcode.Errorf(errcode.PermissionDenied,
			"Permission denied: %s: %s can be changed by any user (mode %s); %s. `chmod o-w %s` if nobody else should change it",
			what, q, perm, p.refusal(), q)
	case mode.Perm()&0o020 != 0 && !sticky && p.groups[st.Gid] == "":
		return errcode.Errorf(errcode.PermissionDenied,
			"Permission denied: %s: %s can be changed by group %s (mode %s); %s. `chmod g-w %s`, or, if that group is trusted, set \"trustGroup\": %q under \"subagents\" in %s",
			what, q, groupName(st.Gid), perm, p.refusal(), q, groupName(st.Gid), p.settingsFile)
	}
	return nil
}

func ownerName(uid uint32) string {
	id := strconv.FormatUint(uint64(uid), 10)
	if u, err := user.LookupId(id); err == nil {
		return fmt.Sprintf("uid %s (%s)", id, u.Username)
	}
	return "uid " + id
}

func groupName(gid uint32) string {
	id := strconv.FormatUint(uint64(gid), 10)
	if g, err := user.LookupGroupId(id); err == nil {
		return g.Name
	}
	return id
}

// checkLoads refuses a profile when its file, or a file it makes the child
// load or read into its prompt, could have been written by another user:
// its extensions and skills (pi loads them at its start, before any model
// call), the skills read into its prompt, a prompt given as a file's path,
// and what its extraArgs name for pi to load. cwd is the child's: pi
// resolves relative paths from it.
func (p trustPolicy) checkLoads(cwd string, prof *Profile, r Resolved) error {
	name := prof.Name
	if prof.Path != "" {
		if err := p.check(fmt.Sprintf("profile %q", name), prof.Path); err != nil {
			return err
		}
	}
	for _, e := range r.Child.Extensions {
		if err := p.checkResource(fmt.Sprintf("extension %q of profile %q", e, name), e, cwd); err != nil {
			return err
		}
	}
	for _, s := range append(append([]string(nil), r.Child.Skills...), r.ReadFiles...) {
		if err := p.check(fmt.Sprintf("skill %s of profile %q", s, name), s); err != nil {
			return err
		}
	}
	for _, text := range append([]string{r.Child.SystemPrompt}, r.Child.AppendSystemPrompt...) {
		if f := promptFile(text, cwd); f != "" {
			if err := p.check(fmt.Sprintf("prompt file %s of profile %q", f, name), f); err != nil {
				return err
			}
		}
	}
	for _, v := range extraArgResources(r.Child.ExtraArgs) {
		what := fmt.Sprintf("%s %q in the extraArgs of profile %q", v.flag, v.value, name)
		var err error
		if v.flag == "--system-prompt" || v.flag == "--append-system-prompt" {
			if f := promptFile(v.value, cwd); f != "" {
				err = p.check(what, f)
			}
		} else {
			err = p.checkResource(what, v.value, cwd)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// checkResource checks an extension, skill, prompt template or theme as pi
// resolves it (utils/paths.ts resolvePath): from cwd, with ~ for the home
// folder; a package source (npm:, git:, a URL) is not a file here.
func (p trustPolicy) checkResource(what, value, cwd string) error {
	for _, prefix := range []string{"npm:", "git:", "github:", "http:", "https:", "ssh:"} {
		if strings.HasPrefix(strings.TrimSpace(value), prefix) {
			return nil
		}
	}
	path := value
	if home, err := os.UserHomeDir(); err == nil && (path == "~" || strings.HasPrefix(path, "~/")) {
		path = filepath.Join(home, strings.TrimPrefix(path, "~"))
	}
	if u, ok := strings.CutPrefix(path, "file://"); ok {
		path = u
	}
	if !filepath.IsAbs(path) {
		path = filepath.Join(cwd, path)
	}
	return p.check(what, path)
}

// promptFile is the file pi reads for a --system-prompt or
// --append-system-prompt value, or "": pi reads an existing file's content
// in place of the text (resource-loader.ts resolvePromptInput), from its
// cwd.
func promptFile(text, cwd string) string {
	if text == "" || strings.ContainsAny(text, "\n\x00") {
		return ""
	}
	path := text
	if !filepath.IsAbs(path) {
		path = filepath.Join(cwd, path)
	}
	if _, err := os.Stat(path); err != nil {
		return ""
	}
	return path
}

// resourceFlags are pi's flags whose value names a file it loads or reads.
var resourceFlags = map[string]string{
	"-e": "--extension", "--extension": "--extension", "--skill": "--skill",
	"--prompt-template": "--prompt-template", "--theme": "--theme",
	"--system-prompt": "--system-prompt", "--append-system-prompt": "--append-system-prompt",
}

type flagValue struct{ flag, value string }

// extraArgResources are the values of resourceFlags in args, as
// "--flag value" or "--flag=value".
func extraArgResources(args []string) []flagValue {
	var out []flagValue
	for i := 0; i < len(args); i++ {
		flag, value, hasValue := strings.Cut(args[i], "=")
		canon, ok := resourceFlags[flag]
		if !ok {
			continue
		}
		if !hasValue {
			if i+1 == len(args) {
				break
			}
			i++
			value = args[i]
		}
		out = append(out, flagValue{canon, value})
	}
	return out
}
