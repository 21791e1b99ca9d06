// Package deploy_test checks the shipping files against the code they
// ship: the release build's version injection (.goreleaser.yaml), the
// container image (Dockerfile, deploy/docker), the systemd unit, the
// Kubernetes example and the operator docs (docs/*.md), so that none of
// them drifts from the flags, keys, routes and metrics paystate has.
package deploy_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"text/template"
	"time"
	"unicode"

	"sigs.k8s.io/yaml"

	"github.com/paystate/paystate/cli"
	"github.com/paystate/paystate/config"
	"github.com/paystate/paystate/finalize"
)

// root is the repository root, seen from this package's directory.
const root = ".."

func readFile(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// goreleaserConfig is the part of .goreleaser.yaml the tests read.
type goreleaserConfig struct {
	Version int `json:"version"`
	Builds  []struct {
		Main    string   `json:"main"`
		Env     []string `json:"env"`
		Goos    []string `json:"goos"`
		Goarch  []string `json:"goarch"`
		Flags   []string `json:"flags"`
		Ldflags []string `json:"ldflags"`
	} `json:"builds"`
	Archives []struct {
		Files []string `json:"files"`
	} `json:"archives"`
	Checksum struct {
		NameTemplate string `json:"name_template"`
	} `json:"checksum"`
}

func loadGoreleaser(t *testing.T) goreleaserConfig {
	t.Helper()
	var c goreleaserConfig
	if err := yaml.Unmarshal([]byte(readFile(t, ".goreleaser.yaml")), &c); err != nil {
		t.Fatalf(".goreleaser.yaml: %v", err)
	}
	if len(c.Builds) != 1 {
		t.Fatalf(".goreleaser.yaml: %d builds, want 1", len(c.Builds))
	}
	return c
}

// xSymbol matches the variable a -X linker flag sets.
var xSymbol = regexp.MustCompile(`-X\s+([\w./-]+)=`)

// xSymbols returns the variables the -X flags in s set, sorted.
func xSymbols(s string) []string {
	var syms []string
	for _, m := range xSymbol.FindAllStringSubmatch(s, -1) {
		syms = append(syms, m[1])
	}
	slices.Sort(syms)
	return syms
}

// TestGoreleaser_Symbols checks that every variable the release's -X
// flags set is a package-level string variable of this module.
func TestGoreleaser_Symbols(t *testing.T) {
	t.Parallel()
	c := loadGoreleaser(t)
	syms := xSymbols(strings.Join(c.Builds[0].Ldflags, " "))
	if len(syms) == 0 {
		t.Fatal("the release sets no version with -X")
	}
	for _, sym := range syms {
		pkg, name := sym[:strings.LastIndex(sym, ".")], sym[strings.LastIndex(sym, ".")+1:]
		rel, ok := strings.CutPrefix(pkg, "github.com/paystate/paystate")
		if !ok {
			t.Errorf("-X %s: not a package of this module", sym)
			continue
		}
		if !declaresStringVar(t, filepath.Join(root, rel), name) {
			t.Errorf("-X %s: package %s declares no string variable %s", sym, pkg, name)
		}
	}
}

// declaresStringVar reports whether the Go package in dir declares a
// package-level variable name of type string (or untyped, with no value).
func declaresStringVar(t *testing.T, dir, name string) bool {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range file.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.VAR {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for _, n := range vs.Names {
					if n.Name != name {
						continue
					}
					if id, ok := vs.Type.(*ast.Ident); ok && id.Name == "string" {
						return true
					}
					if vs.Type == nil && len(vs.Values) == 1 {
						if lit, ok := vs.Values[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
							return true
						}
					}
				}
			}
		}
	}
	return false
}

// TestGoreleaser_Targets checks the release matrix, the static build, the
// checksums and that every file the archives name exists.
func TestGoreleaser_Targets(t *testing.T) {
	t.Parallel()
	c := loadGoreleaser(t)
	if got, want := c.Version, 2; got != want {
		t.Errorf("version=%d, want %d", got, want)
	}
	b := c.Builds[0]
	for _, want := range []string{"linux", "darwin"} {
		if !slices.Contains(b.Goos, want) {
			t.Errorf("goos=%v, want %s in it", b.Goos, want)
		}
	}
	for _, want := range []string{"amd64", "arm64"} {
		if !slices.Contains(b.Goarch, want) {
			t.Errorf("goarch=%v, want %s in it", b.Goarch, want)
		}
	}
	if !slices.Contains(b.Env, "CGO_ENABLED=0") {
		t.Errorf("env=%v, want CGO_ENABLED=0 (a static binary)", b.Env)
	}
	if c.Checksum.NameTemplate == "" {
		t.Error("checksum.name_template is empty")
	}
	for _, a := range c.Archives {
		for _, f := range a.Files {
			pattern := f
			if i := strings.Index(pattern, "**"); i >= 0 {
				pattern = pattern[:i] + "*" // the folder must exist and hold something
			}
			if m, _ := filepath.Glob(filepath.Join(root, pattern)); len(m) == 0 {
				t.Errorf("archives.files: %q matches no file", f)
			}
		}
	}
}

// TestGoreleaser_VersionInjected builds paystate with the release's
// ldflags (templates rendered as goreleaser would) and checks that
// `paystate version` prints the injected version: a -X flag naming a
// variable that does not exist is silently ignored by the linker.
func TestGoreleaser_VersionInjected(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	c := loadGoreleaser(t)
	const version = "9.8.7-shiptest"
	vars := map[string]string{"Version": version, "Commit": "0123abc", "ShortCommit": "0123abc", "Date": "2026-01-02T03:04:05Z"}
	var ldflags []string
	for _, f := range c.Builds[0].Ldflags {
		tpl, err := template.New("ldflags").Option("missingkey=error").Parse(f)
		if err != nil {
			t.Fatalf("ldflags %q: %v", f, err)
		}
		var sb strings.Builder
		if err := tpl.Execute(&sb, vars); err != nil {
			t.Fatalf("ldflags %q: %v", f, err)
		}
		ldflags = append(ldflags, sb.String())
	}
	bin := filepath.Join(t.TempDir(), "paystate")
	args := append([]string{"build"}, c.Builds[0].Flags...)
	args = append(args, "-ldflags", strings.Join(ldflags, " "), "-o", bin, c.Builds[0].Main)
	build := exec.Command("go", args...)
	build.Dir = root
	build.Env = append(os.Environ(), c.Builds[0].Env...)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("paystate version: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), version) {
		t.Errorf("paystate version printed %q, want the injected %q (ldflags %q)", out, version, ldflags)
	}
}

// dockerfile is what TestDockerfile reads from the Dockerfile: the
// arguments of the last stage's instructions (one per line, JSON form or
// not, continuation lines joined).
type dockerfile map[string][]string

func parseDockerfile(t *testing.T) dockerfile {
	t.Helper()
	d := dockerfile{}
	var cur string
	for _, line := range strings.Split(readFile(t, "Dockerfile"), "\n") {
		trimmed := strings.TrimSpace(line)
		if cur == "" && (trimmed == "" || strings.HasPrefix(trimmed, "#")) {
			continue
		}
		cont := strings.HasSuffix(trimmed, "\\")
		cur += strings.TrimSuffix(trimmed, "\\") + " "
		if cont {
			continue
		}
		instr, rest, _ := strings.Cut(strings.TrimSpace(cur), " ")
		instr = strings.ToUpper(instr)
		if instr == "FROM" {
			for k := range d {
				if k != "RUN" {
					delete(d, k) // only the last stage's image settings count
				}
			}
		}
		d[instr] = append(d[instr], strings.TrimSpace(rest))
		cur = ""
	}
	return d
}

// TestDockerfile checks the image against the code: the same version
// variable as the release, a non-root user, the data volume holding the
// configured database, the health check on a real route with a Host the
// configuration accepts, and a shipped configuration that is valid with
// the environment the image documents and invalid without it.
func TestDockerfile(t *testing.T) {
	t.Parallel()
	d := parseDockerfile(t)
	c := loadGoreleaser(t)

	if release, image := xSymbols(strings.Join(c.Builds[0].Ldflags, " ")), xSymbols(strings.Join(d["RUN"], " ")); len(release) == 0 || !slices.Equal(release, image) {
		t.Errorf("-X variables: release %v, image %v, want the same", release, image)
	}
	if u := d["USER"]; len(u) == 0 || strings.HasPrefix(u[len(u)-1], "0") || strings.HasPrefix(u[len(u)-1], "root") {
		t.Errorf("USER=%v, want a non-root user", u)
	}
	volume := strings.Trim(strings.Join(d["VOLUME"], " "), `[]" `)
	if volume != "/var/lib/paystate" {
		t.Errorf("VOLUME=%q, want /var/lib/paystate", volume)
	}
	hc := strings.Join(d["HEALTHCHECK"], " ")
	if !strings.Contains(hc, "http://127.0.0.1:8080/healthz") {
		t.Errorf("HEALTHCHECK=%q, want a GET of http://127.0.0.1:8080/healthz", hc)
	}
	if got := strings.Join(d["EXPOSE"], " "); got != "8080" {
		t.Errorf("EXPOSE=%q, want 8080", got)
	}
	var cmd []string
	if err := yaml.Unmarshal([]byte(strings.Join(d["CMD"], " ")), &cmd); err != nil || len(cmd) != 3 || cmd[0] != "serve" || cmd[1] != "-config" {
		t.Fatalf("CMD=%v (%v), want [serve -config FILE]", d["CMD"], err)
	}
	copied := false
	for _, cp := range d["COPY"] {
		copied = copied || cp == "deploy/docker/paystate.toml "+cmd[2]
	}
	if !copied {
		t.Errorf("COPY=%v, want deploy/docker/paystate.toml copied to %s", d["COPY"], cmd[2])
	}

	env := map[string]string{
		"PAYSTATE_AUTH_API_KEYS":                   "image-test-key-0123456789",
		"PAYSTATE_PROVIDERS_STRIPE_SECRET_KEY":     "sk_test_image",
		"PAYSTATE_PROVIDERS_STRIPE_WEBHOOK_SECRET": "whsec_image",
	}
	path := filepath.Join(root, "deploy", "docker", "paystate.toml")
	cfg, err := config.LoadEnv(path, func(k string) string { return env[k] })
	if err != nil {
		t.Fatalf("deploy/docker/paystate.toml with the image's environment: %v", err)
	}
	for _, name := range []string{"Dockerfile", "deploy/docker/paystate.toml"} {
		for k := range env {
			if !strings.Contains(readFile(t, name), k) {
				t.Errorf("%s does not name %s, which the image needs", name, k)
			}
		}
	}
	if _, err := config.LoadEnv(path, func(string) string { return "" }); err == nil {
		t.Error("deploy/docker/paystate.toml is valid with no environment: it should need its secrets")
	}
	if dir := filepath.Dir(cfg.Storage.Path); dir != volume {
		t.Errorf("storage.path=%q is not in the volume %s", cfg.Storage.Path, volume)
	}
	if !strings.HasSuffix(cfg.Server.Listen, ":8080") || strings.HasPrefix(cfg.Server.Listen, "127.") {
		t.Errorf("server.listen=%q, want a non-loopback address on port 8080", cfg.Server.Listen)
	}
	if !served("127.0.0.1", cfg.Server.AllowedHosts) {
		t.Errorf("server.allowed_hosts=%v: the HEALTHCHECK's Host 127.0.0.1 would get 421", cfg.Server.AllowedHosts)
	}
}

// served reports whether a Host name (no port) passes server.allowed_hosts:
// an IP address and localhost always do (SPEC §2), a name only if listed.
func served(host string, allowed []string) bool {
	if len(allowed) == 0 || host == "localhost" || net.ParseIP(strings.Trim(host, "[]")) != nil {
		return true
	}
	return slices.Contains(allowed, host)
}

// TestSystemdUnit checks the hardening the unit promises and that its
// ExecStart is a command line paystate accepts.
func TestSystemdUnit(t *testing.T) {
	t.Parallel()
	unit := map[string][]string{}
	sc := bufio.NewScanner(strings.NewReader(readFile(t, "deploy/systemd/paystate.service")))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			unit[k] = append(unit[k], v)
		}
	}
	for k, want := range map[string]string{
		"DynamicUser": "yes", "StateDirectory": "paystate", "ProtectSystem": "strict",
		"NoNewPrivileges": "yes", "ProtectHome": "yes", "PrivateTmp": "yes", "PrivateDevices": "yes",
		"ProtectKernelTunables": "yes", "ProtectKernelModules": "yes", "ProtectControlGroups": "yes",
		"RestrictSUIDSGID": "yes", "RestrictNamespaces": "yes", "CapabilityBoundingSet": "",
		"WorkingDirectory": "/var/lib/paystate", "RestartPreventExitStatus": "2",
	} {
		if got := unit[k]; len(got) != 1 || got[0] != want {
			t.Errorf("%s=%q, want %q", k, got, want)
		}
	}
	argv := strings.Fields(strings.Join(unit["ExecStart"], ""))
	if len(argv) < 2 || filepath.Base(argv[0]) != "paystate" || argv[1] != "serve" {
		t.Fatalf("ExecStart=%v, want paystate serve ...", argv)
	}
	checkFlags(t, "ExecStart", argv[1:])
}

// TestKubernetesSidecar checks the example against paystate: the
// ConfigMap's configuration is valid with exactly the environment the
// paystate container gets from the Secret, the database is on the
// volume, the port is the one it listens on, and the probes ask real
// routes with a Host that server.allowed_hosts accepts.
func TestKubernetesSidecar(t *testing.T) {
	t.Parallel()
	docs := strings.Split(readFile(t, "deploy/kubernetes/paystate-sidecar.yaml"), "\n---\n")
	type envVar struct {
		Name      string `json:"name"`
		Value     string `json:"value"`
		ValueFrom *struct {
			SecretKeyRef *struct{ Name, Key string } `json:"secretKeyRef"`
		} `json:"valueFrom"`
	}
	type probe struct {
		HTTPGet struct {
			Path        string                         `json:"path"`
			Port        int                            `json:"port"`
			HTTPHeaders []struct{ Name, Value string } `json:"httpHeaders"`
		} `json:"httpGet"`
	}
	type container struct {
		Name           string                             `json:"name"`
		Args           []string                           `json:"args"`
		Env            []envVar                           `json:"env"`
		Ports          []struct{ ContainerPort int }      `json:"ports"`
		StartupProbe   *probe                             `json:"startupProbe"`
		LivenessProbe  *probe                             `json:"livenessProbe"`
		ReadinessProbe *probe                             `json:"readinessProbe"`
		VolumeMounts   []struct{ Name, MountPath string } `json:"volumeMounts"`
	}
	var (
		toml     string
		secrets  = map[string]map[string]string{}
		paystate *container
	)
	for _, doc := range docs {
		var obj struct {
			Kind     string
			Metadata struct{ Name string }
			Data     map[string]string
			Strings  map[string]string `json:"stringData"`
			Spec     struct {
				Template struct {
					Spec struct {
						InitContainers []container `json:"initContainers"`
						Containers     []container `json:"containers"`
					}
				}
			}
		}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatal(err)
		}
		switch obj.Kind {
		case "ConfigMap":
			toml = obj.Data["paystate.toml"]
		case "Secret":
			secrets[obj.Metadata.Name] = obj.Strings
		case "Deployment":
			for _, c := range append(obj.Spec.Template.Spec.InitContainers, obj.Spec.Template.Spec.Containers...) {
				if c.Name == "paystate" {
					paystate = &c
				}
			}
		}
	}
	if toml == "" || paystate == nil {
		t.Fatalf("want a ConfigMap with paystate.toml and a container named paystate")
	}
	env := map[string]string{}
	for _, e := range paystate.Env {
		switch {
		case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
			ref := e.ValueFrom.SecretKeyRef
			v, ok := secrets[ref.Name][ref.Key]
			if !ok {
				t.Errorf("env %s: secret %s has no key %s", e.Name, ref.Name, ref.Key)
			}
			env[e.Name] = v
		default:
			env[e.Name] = e.Value
		}
	}
	if env["PAYSTATE_AUTH_API_KEYS"] != "" {
		env["PAYSTATE_AUTH_API_KEYS"] = "sidecar-test-key-0123456789" // the example's placeholder is no valid key
	}
	path := filepath.Join(t.TempDir(), "paystate.toml")
	if err := os.WriteFile(path, []byte(toml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.LoadEnv(path, func(k string) string { return env[k] })
	if err != nil {
		t.Fatalf("the ConfigMap's paystate.toml with the container's environment: %v", err)
	}
	if cfg.Providers.Stripe == nil || cfg.Providers.Stripe.SecretKey != env["PAYSTATE_PROVIDERS_STRIPE_SECRET_KEY"] || len(cfg.Webhooks) == 0 || cfg.Webhooks[0].Secret != env["PAYSTATE_WEBHOOKS_0_SECRET"] {
		t.Error("the Stripe key and the merchant endpoint's secret do not come from the Secret")
	}
	if got := paystate.Args; len(got) != 3 || got[0] != "serve" || got[1] != "-config" {
		t.Errorf("args=%v, want serve -config FILE", got)
	} else {
		checkFlags(t, "paystate container args", got)
		mounted := false
		for _, m := range paystate.VolumeMounts {
			mounted = mounted || (m.Name == "config" && filepath.Join(m.MountPath, "paystate.toml") == got[2])
		}
		if !mounted {
			t.Errorf("the config volume is not mounted where -config %s reads it", got[2])
		}
	}
	onVolume := false
	for _, m := range paystate.VolumeMounts {
		onVolume = onVolume || (m.Name == "data" && filepath.Dir(cfg.Storage.Path) == m.MountPath)
	}
	if !onVolume {
		t.Errorf("storage.path=%q is not on the data volume", cfg.Storage.Path)
	}
	port := 0
	if len(paystate.Ports) == 1 {
		port = paystate.Ports[0].ContainerPort
	}
	if !strings.HasSuffix(cfg.Server.Listen, ":"+strconv.Itoa(port)) || strings.HasPrefix(cfg.Server.Listen, "127.") {
		t.Errorf("server.listen=%q, containerPort %d: want a non-loopback address on that port", cfg.Server.Listen, port)
	}
	for name, want := range map[string]struct {
		p    *probe
		path string
	}{
		"startupProbe": {paystate.StartupProbe, "/healthz"}, "livenessProbe": {paystate.LivenessProbe, "/healthz"},
		"readinessProbe": {paystate.ReadinessProbe, "/readyz"},
	} {
		if want.p == nil {
			t.Errorf("%s: missing", name)
			continue
		}
		g := want.p.HTTPGet
		if g.Path != want.path || g.Port != port {
			t.Errorf("%s: GET :%d%s, want :%d%s", name, g.Port, g.Path, port, want.path)
		}
		host := "10.1.2.3" // no Host header: the kubelet sends the Pod's IP
		for _, h := range g.HTTPHeaders {
			if strings.EqualFold(h.Name, "Host") {
				host = h.Value
			}
		}
		if !served(host, cfg.Server.AllowedHosts) {
			t.Errorf("%s: Host %q is not in server.allowed_hosts %v: the probe would get 421", name, host, cfg.Server.AllowedHosts)
		}
	}
}

// run runs a paystate command in this process and returns what it
// printed on both streams.
func run(args ...string) string {
	var out bytes.Buffer
	_ = cli.Run(context.Background(), args, &out, &out)
	return out.String()
}

var (
	commandLine = regexp.MustCompile(`(?m)^  ([a-z][a-z-]*)\b`)
	flagLine    = regexp.MustCompile(`(?m)^\s+-([A-Za-z][\w-]*)`)
)

// commands returns the subcommands paystate's usage lists.
func commands() []string {
	var cmds []string
	for _, m := range commandLine.FindAllStringSubmatch(run("help"), -1) {
		cmds = append(cmds, m[1])
	}
	return cmds
}

// flagsOf returns the flags `paystate ARGS -h` lists.
func flagsOf(args ...string) []string {
	var flags []string
	for _, m := range flagLine.FindAllStringSubmatch(run(append(slices.Clip(args), "-h")...), -1) {
		flags = append(flags, m[1])
	}
	return flags
}

// checkFlags checks that args (a subcommand, maybe a sub-subcommand, then
// flags and values) name a subcommand of paystate and only flags of it.
func checkFlags(t *testing.T, where string, args []string) {
	t.Helper()
	if !slices.Contains(commands(), args[0]) {
		t.Errorf("%s: paystate has no command %q (usage lists %v)", where, args[0], commands())
		return
	}
	cmd := args[:1]
	if len(args) > 1 && regexp.MustCompile(`^[a-z]+$`).MatchString(args[1]) {
		if f := flagsOf(args[0], args[1]); len(f) > 0 {
			cmd = args[:2]
		}
	}
	known := flagsOf(cmd...)
	for _, a := range args[len(cmd):] {
		if !strings.HasPrefix(a, "-") || a == "-" {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !slices.Contains(known, name) {
			t.Errorf("%s: paystate %s has no flag -%s (it has %v)", where, strings.Join(cmd, " "), name, known)
		}
	}
}

// docSegments returns the code of a Markdown file: every line of its
// fenced blocks (shell comments cut off) and every inline code span.
func docSegments(text string) (fenced, inline []string) {
	inFence := false
	span := regexp.MustCompile("`([^`]+)`")
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inFence = !inFence
			continue
		}
		if inFence {
			if i := strings.Index(line, " #"); i >= 0 {
				line = line[:i]
			}
			if strings.HasPrefix(strings.TrimSpace(line), "#") {
				continue
			}
			fenced = append(fenced, line)
			continue
		}
		for _, m := range span.FindAllStringSubmatch(line, -1) {
			inline = append(inline, m[1])
		}
	}
	return fenced, inline
}

// shellEnd ends a command on a line of shell.
var shellEnd = regexp.MustCompile(`^(\||\|\||&&|;|&|>.*|2>.*|\))$`)

// TestDocs_Commands checks every `paystate <command> -flag ...` that the
// operator docs show: the command and each flag must exist.
func TestDocs_Commands(t *testing.T) {
	t.Parallel()
	files, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if len(files) == 0 {
		t.Fatal("no docs/*.md")
	}
	word := regexp.MustCompile(`^[a-z][a-z-]*$`)
	seen := 0
	for _, f := range files {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		fenced, inline := docSegments(string(text))
		for _, seg := range append(fenced, inline...) {
			toks := strings.Fields(seg)
			for i := 0; i < len(toks)-1; i++ {
				if strings.Trim(filepath.Base(toks[i]), `'"`) != "paystate" || !word.MatchString(toks[i+1]) {
					continue
				}
				args := []string{}
				for _, a := range toks[i+1:] {
					if shellEnd.MatchString(a) {
						break
					}
					args = append(args, strings.Trim(a, `'"`))
				}
				checkFlags(t, filepath.Base(f)+": "+strings.TrimSpace(seg), args)
				seen++
			}
		}
	}
	if seen == 0 {
		t.Error("found no paystate command in docs/*.md")
	}
}

// configKeys returns every key and table of the configuration as a
// dotted path ("server.allowed_hosts", "providers.stripe"), from the toml
// tags of config.Config.
func configKeys() map[string]bool {
	keys := map[string]bool{}
	text := reflect.TypeFor[encoding.TextUnmarshaler]()
	var walk func(reflect.Type, string)
	walk = func(typ reflect.Type, prefix string) {
		for i := range typ.NumField() {
			f := typ.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
			if name == "" || name == "-" {
				continue
			}
			path := prefix + name
			keys[path] = true
			ft := f.Type
			for ft.Kind() == reflect.Pointer || ft.Kind() == reflect.Slice {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct && !reflect.PointerTo(ft).Implements(text) {
				walk(ft, path+".")
			}
		}
	}
	walk(reflect.TypeFor[config.Config](), "")
	return keys
}

// TestDocs_ConfigKeys checks every configuration key the docs name in
// code (`server.allowed_hosts`, `webhooks[].timeout`): it must exist,
// unless it is one of paystate's own names of something else (an event
// type such as `payment.captured`): a string constant of the code or a
// name of the OpenAPI document.
func TestDocs_ConfigKeys(t *testing.T) {
	t.Parallel()
	keys := configKeys()
	tables := map[string]bool{}
	for k := range keys {
		tables[strings.Split(k, ".")[0]] = true
	}
	source := goSource(t)
	openapi, _ := os.ReadFile(filepath.Join(root, "api", "openapi.yaml"))
	dotted := regexp.MustCompile(`^([a-z_]+)((?:\[[a-z0-9]*\])?(?:\.[a-z_]+)+)(?:\s*=.*)?$`)
	index := regexp.MustCompile(`\[[a-z0-9]*\]`)
	files, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	for _, f := range files {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		_, inline := docSegments(string(text))
		for _, span := range inline {
			m := dotted.FindStringSubmatch(strings.TrimSpace(span))
			if m == nil || !tables[m[1]] {
				continue
			}
			key := m[1] + index.ReplaceAllString(m[2], "")
			inAPI := regexp.MustCompile(`(^|[^\w.])` + regexp.QuoteMeta(key) + `([^\w.]|$)`).Match(openapi)
			if !keys[key] && !strings.Contains(source, `"`+key+`"`) && !inAPI {
				t.Errorf("%s: `%s`: no configuration key %s", filepath.Base(f), span, key)
			}
		}
	}
}

// goSource returns the text of every non-test Go file of the module.
func goSource(t *testing.T) string {
	t.Helper()
	var sb strings.Builder
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			sb.Write(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return sb.String()
}

// TestDocs_Metrics checks that every paystate_* metric the docs name is
// one the code defines (histograms may be named with their _bucket, _sum
// or _count series). Database names in the runbooks (a DSN's path,
// CREATE DATABASE) are not metrics.
func TestDocs_Metrics(t *testing.T) {
	t.Parallel()
	source := goSource(t)
	metric := regexp.MustCompile(`(^|[^/\w])(paystate_[a-z0-9_]+)`)
	defined := func(name string) bool {
		return regexp.MustCompile(regexp.QuoteMeta(name) + `([^a-z0-9_]|$)`).MatchString(source)
	}
	files, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	for _, f := range files {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(text), "\n") {
			if strings.Contains(strings.ToUpper(line), "DATABASE") {
				continue
			}
			for _, m := range metric.FindAllStringSubmatch(line, -1) {
				name, base := m[2], m[2]
				for _, suffix := range []string{"_bucket", "_sum", "_count"} {
					if !defined(base) {
						base = strings.TrimSuffix(base, suffix)
					}
				}
				if !defined(base) {
					t.Errorf("%s: metric %s is not defined anywhere in the code", filepath.Base(f), name)
				}
			}
		}
	}
}

// TestDocs_StripeEvents checks that docs/stripe.md names exactly the
// Stripe event types psp/stripe maps (its Type... constants): in the
// `stripe listen --events` line and in the table of events to enable.
func TestDocs_StripeEvents(t *testing.T) {
	t.Parallel()
	var mapped []string
	files, _ := filepath.Glob(filepath.Join(root, "psp", "stripe", "*.go"))
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range file.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if !strings.HasPrefix(n.Name, "Type") || i >= len(vs.Values) {
						continue
					}
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						v, _ := strconv.Unquote(lit.Value)
						mapped = append(mapped, v)
					}
				}
			}
		}
	}
	slices.Sort(mapped)
	if len(mapped) == 0 {
		t.Fatal("psp/stripe declares no Type... event constants")
	}
	doc := readFile(t, "docs/stripe.md")
	m := regexp.MustCompile(`--events ([a-z_.,]+)`).FindStringSubmatch(doc)
	if m == nil {
		t.Fatal("docs/stripe.md: no `stripe listen --events` list")
	}
	listed := strings.Split(m[1], ",")
	slices.Sort(listed)
	if !slices.Equal(listed, mapped) {
		t.Errorf("docs/stripe.md: stripe listen --events %v, psp/stripe maps %v", listed, mapped)
	}
	var rows []string
	for _, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(line, "| `") {
			first, _, _ := strings.Cut(line[1:], "|")
			rows = append(rows, first)
		}
	}
	for _, e := range mapped {
		if !slices.ContainsFunc(rows, func(r string) bool { return strings.Contains(r, "`"+e+"`") }) {
			t.Errorf("docs/stripe.md: event %s is not in the table of events to enable", e)
		}
	}
}

// TestExampleConfig_ProductionEdits: config.example.toml, which the
// systemd unit installs, is the development setup; with the API key from
// the environment it is production and refused (SPEC §2), and after the
// edits docs/production.md lists (each named there) it is accepted. Each
// of the provider edits left out is refused, naming its key.
func TestExampleConfig_ProductionEdits(t *testing.T) {
	t.Parallel()
	example := readFile(t, "config.example.toml")
	doc := readFile(t, "docs/production.md")
	env := map[string]string{
		"PAYSTATE_AUTH_API_KEYS":                   "example-test-key-0123456789",
		"PAYSTATE_PROVIDERS_STRIPE_SECRET_KEY":     "rk_live_example",
		"PAYSTATE_PROVIDERS_STRIPE_WEBHOOK_SECRET": "whsec_example",
	}
	load := func(t *testing.T, toml string) error {
		t.Helper()
		path := filepath.Join(t.TempDir(), "paystate.toml")
		if err := os.WriteFile(path, []byte(toml), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := config.LoadEnv(path, func(k string) string { return env[k] })
		return err
	}
	// dropTable removes the table header and its keys, up to the next header.
	dropTable := func(s, header string) string {
		var out []string
		in := false
		for _, line := range strings.Split(s, "\n") {
			if strings.HasPrefix(line, "[") {
				in = strings.HasPrefix(line, header)
			}
			if !in {
				out = append(out, line)
			}
		}
		return strings.Join(out, "\n")
	}
	type edit struct {
		name  string
		apply func(string) string
		named []string // what docs/production.md must say for it
		key   string   // the key named when it is left out ("": optional)
	}
	replace := func(old, new string) func(string) string {
		return func(s string) string {
			if !strings.Contains(s, old) {
				t.Fatalf("config.example.toml has no %q", old)
			}
			return strings.Replace(s, old, new, 1)
		}
	}
	edits := []edit{
		{"allowed_hosts", replace(`allowed_hosts = []`, `allowed_hosts = ["pay.example.com"]`), []string{`allowed_hosts = ["pay.example.com"]`}, ""},
		{"storage.path", replace(`path = "./paystate.db"`, `path = "/var/lib/paystate/paystate.db"`), []string{`path = "/var/lib/paystate/paystate.db"`}, ""},
		{"log.format", replace(`format = "console"`, `format = "json"`), []string{`format = "json"`}, ""},
		{"payment.provider", replace(`provider = "mock"`, `provider = "stripe"`), []string{`provider = "mock"`, `provider = "stripe"`}, "payment.provider"},
		{"providers.mock", func(s string) string { return dropTable(s, "[providers.mock]") }, []string{"`[providers.mock]`"}, "providers.mock.allow_public"},
		{"providers.standard", func(s string) string { return dropTable(s, "[providers.standard]") }, []string{"`[providers.standard]`"}, "providers.standard.webhook_secret"},
		{"providers.stripe", func(s string) string { return s + "\n[providers.stripe]\n" }, []string{"`[providers.stripe]`"}, "providers.stripe"},
	}
	for _, e := range edits {
		for _, n := range e.named {
			if !strings.Contains(doc, n) {
				t.Errorf("docs/production.md does not name the edit %s (%s)", e.name, n)
			}
		}
	}
	for k := range env {
		if !strings.Contains(doc, k) {
			t.Errorf("docs/production.md does not name %s", k)
		}
	}
	if !strings.Contains(readFile(t, "deploy/systemd/paystate.service"), "install -D -m 0644 config.example.toml") {
		t.Error("the systemd unit no longer installs config.example.toml: check this test's premise")
	}

	if err := load(t, example); err == nil || !strings.Contains(err.Error(), "providers.mock.allow_public") {
		t.Errorf("config.example.toml with an API key in the environment: err=%v, want the mock refused", err)
	}
	all := example
	for _, e := range edits {
		all = e.apply(all)
	}
	if err := load(t, all); err != nil {
		t.Fatalf("config.example.toml after the edits of docs/production.md: %v", err)
	}
	for i, e := range edits {
		if e.key == "" {
			continue
		}
		partial := example
		for j, o := range edits {
			if j != i {
				partial = o.apply(partial)
			}
		}
		if err := load(t, partial); err == nil || !strings.Contains(err.Error(), e.key) {
			t.Errorf("without the edit %s: err=%v, want one naming %s", e.name, err, e.key)
		}
	}
}

// TestDocs_Figures: what docs/decisions.md, the README's tour and
// docs/production.md say about retries, waits and the image's user
// matches the code: an unknown payment's webhook is tried
// webhook_inbox.max_attempts times with the inbox's backoff (about a
// minute, not "three times"), the tour's 04 payment waits
// sweeper.min_age, and a Docker bind mount must belong to the image's uid.
func TestDocs_Figures(t *testing.T) {
	t.Parallel()
	readme := strings.Join(strings.Fields(readFile(t, "README.md")), " ")
	decisions := strings.Join(strings.Fields(readFile(t, "docs/decisions.md")), " ")
	cfg := config.DefaultConfig()

	if strings.Contains(readme, "retried three times") || strings.Contains(decisions, "retried three times") {
		t.Error("README or docs/decisions.md: an unknown payment's webhook is not retried three times")
	}
	// The waits between the tries: backoff.Delay's nominal delays, each
	// drawn in their upper half.
	var most time.Duration
	for n := 1; n < cfg.WebhookInbox.MaxAttempts; n++ {
		d := finalize.DefaultInboxBackoffBase << (n - 1)
		if d > finalize.DefaultInboxBackoffCap || d <= 0 {
			d = finalize.DefaultInboxBackoffCap
		}
		most += d
	}
	if most/2 < 30*time.Second || most > 90*time.Second {
		t.Errorf("the inbox's retries take %s to %s: docs/decisions.md's \"about a minute\" is wrong", most/2, most)
	}
	for _, want := range []string{
		fmt.Sprintf("up to `webhook_inbox.max_attempts` tries, %d by default", cfg.WebhookInbox.MaxAttempts),
		fmt.Sprintf("from %v s to %v s between tries: about a minute", finalize.DefaultInboxBackoffBase.Seconds(), finalize.DefaultInboxBackoffCap.Seconds()),
	} {
		if !strings.Contains(decisions, want) {
			t.Errorf("docs/decisions.md does not say %q", want)
		}
	}
	if want := fmt.Sprintf("`sweeper.min_age`, %d minutes by default", int(cfg.Sweeper.MinAge.Minutes())); !strings.Contains(readme, want) {
		t.Errorf("README's tour does not say %q", want)
	}

	prod := strings.Join(strings.Fields(readFile(t, "docs/production.md")), " ")
	d := parseDockerfile(t)
	user := ""
	if u := d["USER"]; len(u) > 0 {
		user, _, _ = strings.Cut(u[len(u)-1], ":")
	}
	if user == "" || !strings.Contains(prod, "bind mount") || !strings.Contains(prod, "must belong to uid "+user) {
		t.Errorf("docs/production.md does not say that a bind mount must belong to uid %q (the image's USER)", user)
	}
}

// mdLink is an inline Markdown link or image: its target, up to the
// first space (a title may follow).
var mdLink = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)[^)]*\)`)

// headingSlugs returns the anchors of a Markdown file's headings as
// GitHub makes them: lowercased, links reduced to their text,
// punctuation dropped but for '-' and '_', spaces as '-', a repeated
// slug numbered -1, -2 and so on.
func headingSlugs(text string) map[string]bool {
	slugs := map[string]bool{}
	seen := map[string]int{}
	linkText := regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
	fenced := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.TrimSpace(strings.TrimLeft(line, "#"))
		h = strings.ToLower(linkText.ReplaceAllString(h, "$1"))
		var sb strings.Builder
		for _, r := range h {
			switch {
			case r == ' ':
				sb.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				sb.WriteRune(r)
			}
		}
		slug := sb.String()
		if n := seen[slug]; n > 0 {
			seen[slug]++
			slug = fmt.Sprintf("%s-%d", slug, n)
		} else {
			seen[slug] = 1
		}
		slugs[slug] = true
	}
	return slugs
}

// TestDocs_Links checks every relative link of the Markdown files at the
// root and in docs/: the file it names exists and, when it names a
// heading (#anchor) of a Markdown file, that heading does. Links inside
// code are not links.
func TestDocs_Links(t *testing.T) {
	t.Parallel()
	top, _ := filepath.Glob(filepath.Join(root, "*.md"))
	docs, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	files := append(top, docs...)
	if len(top) == 0 || len(docs) == 0 {
		t.Fatal("no Markdown files at the root or in docs/")
	}
	code := regexp.MustCompile("`[^`]*`")
	slugs := map[string]map[string]bool{}
	anchors := func(path string) map[string]bool {
		if s, ok := slugs[path]; ok {
			return s
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		slugs[path] = headingSlugs(string(b))
		return slugs[path]
	}
	links := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		name, _ := filepath.Rel(root, f)
		fenced := false
		for n, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "```") {
				fenced = !fenced
				continue
			}
			if fenced {
				continue
			}
			for _, m := range mdLink.FindAllStringSubmatch(code.ReplaceAllString(line, ""), -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				links++
				path, anchor, _ := strings.Cut(target, "#")
				full := f
				if path != "" {
					full = filepath.Join(filepath.Dir(f), filepath.FromSlash(path))
					if _, err := os.Stat(full); err != nil {
						t.Errorf("%s:%d: link %s: no file %s", name, n+1, target, path)
						continue
					}
				}
				if anchor != "" && strings.HasSuffix(full, ".md") && !anchors(full)[anchor] {
					t.Errorf("%s:%d: link %s: no heading #%s in %s", name, n+1, target, anchor, filepath.Base(full))
				}
			}
		}
	}
	if links == 0 {
		t.Error("found no relative link")
	}
}
