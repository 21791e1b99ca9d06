package config

import (
	"encoding"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// EnvPrefix starts the name of every environment variable that sets a
// configuration key.
const EnvPrefix = "PAYSTATE"

// Origins maps the dotted key of each value that did not come from the
// file or the defaults to what set it: the environment variable
// ("server.listen" → "PAYSTATE_SERVER_LISTEN") or the command-line flag
// ("server.listen" → "-listen"). Keys are spelled as Validate spells them:
// "webhooks[0].secret" for an endpoint's key.
type Origins map[string]string

// Flag is a configuration key set on the command line, such as
// `serve -listen ADDR`: Value is parsed as an environment variable's value
// would be, and wins over the file and the environment.
type Flag struct {
	Name  string // the flag as the user typed it, "-listen"
	Key   string // the dotted key, "server.listen"
	Value string
}

// Source is what Read builds a configuration from; each later one wins:
// DefaultConfig, the TOML file at Path, the environment, then Flags.
type Source struct {
	// Path is the TOML file; empty means none (the embedded defaults).
	Path string
	// Getenv reads an environment variable (os.Getenv); nil reads none.
	Getenv func(string) string
	// Flags are keys set on the command line.
	Flags []Flag
}

// EnvName returns the environment variable of a dotted key:
// "server.listen" → "PAYSTATE_SERVER_LISTEN", "webhooks[0].secret" →
// "PAYSTATE_WEBHOOKS_0_SECRET".
func EnvName(key string) string {
	r := strings.NewReplacer(".", "_", "[", "_", "]", "")
	return EnvPrefix + "_" + strings.ToUpper(r.Replace(key))
}

// setting is one key that the environment or a flag may set: a scalar
// field of the configuration, or a list of scalars.
type setting struct {
	key string        // dotted key, "providers.mock.webhook_delay"
	env string        // its variable, "PAYSTATE_PROVIDERS_MOCK_WEBHOOK_DELAY"
	v   reflect.Value // the settable field
}

// textUnmarshaler is the interface of a struct that is one value (Duration).
var textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()

// settings lists the keys of cfg that the environment may set, derived
// from the toml tags so that a key added to a section is covered without
// more code: every scalar (string, bool, integer, float, and a type that
// unmarshals itself from text, such as Duration) and every list of
// scalars, in the sections cfg has. A provider table that is nil (absent
// from the file) has no settings, nor has a [[webhooks]] entry the file
// does not have: the environment fills what the file declares and never
// adds a provider or an endpoint.
func settings(cfg *Config) []setting {
	var out []setting
	walkSettings(reflect.ValueOf(cfg).Elem(), "", &out)
	return out
}

func walkSettings(v reflect.Value, prefix string, out *[]setting) {
	for f := range v.Type().Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		if name == "" || name == "-" || !f.IsExported() {
			continue
		}
		key := name
		if prefix != "" {
			key = prefix + "." + name
		}
		fv := v.FieldByIndex(f.Index)
		switch {
		case isScalar(fv.Type()), fv.Kind() == reflect.Slice && isScalar(fv.Type().Elem()):
			*out = append(*out, setting{key: key, env: EnvName(key), v: fv})
		case fv.Kind() == reflect.Slice && fv.Type().Elem().Kind() == reflect.Struct:
			for j := range fv.Len() {
				walkSettings(fv.Index(j), fmt.Sprintf("%s[%d]", key, j), out)
			}
		case fv.Kind() == reflect.Pointer && fv.Type().Elem().Kind() == reflect.Struct:
			if !fv.IsNil() {
				walkSettings(fv.Elem(), key, out)
			}
		case fv.Kind() == reflect.Struct:
			walkSettings(fv, key, out)
		}
	}
}

// isScalar reports whether t is one value to the environment.
func isScalar(t reflect.Type) bool {
	if reflect.PointerTo(t).Implements(textUnmarshaler) {
		return true
	}
	switch t.Kind() {
	case reflect.String, reflect.Bool,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return true
	}
	return false
}

// setValue parses s into v: a list is comma-separated (spaces around items
// trimmed, empty items dropped) and replaces the whole list.
func setValue(v reflect.Value, s string) error {
	if v.Kind() == reflect.Slice && !reflect.PointerTo(v.Type()).Implements(textUnmarshaler) {
		items := splitList(s)
		list := reflect.MakeSlice(v.Type(), len(items), len(items))
		for i, item := range items {
			if err := setScalar(list.Index(i), item); err != nil {
				return fmt.Errorf("item %d: %w", i, err)
			}
		}
		v.Set(list)
		return nil
	}
	return setScalar(v, s)
}

// setScalar parses s into the scalar v.
func setScalar(v reflect.Value, s string) error {
	if u, ok := v.Addr().Interface().(encoding.TextUnmarshaler); ok {
		return u.UnmarshalText([]byte(s))
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(s)
	case reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return fmt.Errorf("%s is not a boolean: want true or false", quote(s))
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, err := strconv.ParseInt(s, 10, v.Type().Bits())
		if err != nil {
			return fmt.Errorf("%s is not an integer of %d bits", quote(s), v.Type().Bits())
		}
		v.SetInt(n)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, err := strconv.ParseUint(s, 10, v.Type().Bits())
		if err != nil {
			return fmt.Errorf("%s is not an unsigned integer of %d bits", quote(s), v.Type().Bits())
		}
		v.SetUint(n)
	case reflect.Float32, reflect.Float64:
		f, err := strconv.ParseFloat(s, v.Type().Bits())
		if err != nil {
			return fmt.Errorf("%s is not a number", quote(s))
		}
		v.SetFloat(f)
	default:
		return fmt.Errorf("a %s cannot be set from text", v.Type())
	}
	return nil
}

// applyOverrides sets, in cfg, every key whose environment variable is set
// and not empty (an empty variable counts as unset), then every flag. It
// returns what set each key, and every value that did not parse, naming
// the variable (or flag) and the key.
func applyOverrides(cfg *Config, getenv func(string) string, flags []Flag) (Origins, error) {
	origins := Origins{}
	var errs []error
	list := settings(cfg)
	if getenv != nil {
		for _, s := range list {
			val := getenv(s.env)
			if val == "" {
				continue
			}
			if err := setValue(s.v, val); err != nil {
				errs = append(errs, fmt.Errorf("config: %s (%s): %w", s.env, s.key, err))
				continue
			}
			origins[s.key] = s.env
		}
	}
	for _, f := range flags {
		i := slices.IndexFunc(list, func(s setting) bool { return s.key == f.Key })
		if i < 0 {
			errs = append(errs, fmt.Errorf("config: %s: no key %q can be set", f.Name, f.Key))
			continue
		}
		if err := setValue(list[i].v, f.Value); err != nil {
			errs = append(errs, fmt.Errorf("config: %s (%s): %w", f.Name, f.Key, err))
			continue
		}
		origins[f.Key] = f.Name
	}
	return origins, errors.Join(errs...)
}

// blame adds to each problem of a Validate error that is about a key set
// by the environment or a flag what set it: "config: server.listen: ...
// (set by PAYSTATE_SERVER_LISTEN)".
func blame(err error, origins Origins) error {
	if err == nil || len(origins) == 0 {
		return err
	}
	var parts []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		parts = j.Unwrap()
	} else {
		parts = []error{err}
	}
	out := make([]error, len(parts))
	for i, e := range parts {
		out[i] = e
		msg := e.Error()
		for key, by := range origins {
			p := "config: " + key
			if rest, ok := strings.CutPrefix(msg, p); ok && (strings.HasPrefix(rest, ":") || strings.HasPrefix(rest, "[")) {
				out[i] = fmt.Errorf("%w (set by %s)", e, by)
				break
			}
		}
	}
	return errors.Join(out...)
}

// EnvWarnings returns a warning for each variable of environ (os.Environ's
// "NAME=value" form) that looks meant for the configuration of cfg but set
// nothing: one for a provider or a [[webhooks]] entry that cfg does not
// have (the environment adds neither), and one that starts like a section's
// variables (PAYSTATE_SERVER_...) but names none of its keys, such as a
// misspelt PAYSTATE_SERVER_LISTN. Other PAYSTATE_ variables
// (PAYSTATE_API_KEY, read by the commands that talk to a running server)
// are not configuration and are left alone. Values are never repeated.
func EnvWarnings(cfg Config, environ []string) []string {
	present := make(map[string]bool)
	for _, s := range settings(&cfg) {
		present[s.env] = true
	}
	// What the variable could set had the file every provider table and
	// any number of endpoints.
	full := cfg
	m, st, sp, pp, mo := DefaultMock(), DefaultStandard(), Stripe{}, PayPal{}, DefaultMollie()
	full.Providers = Providers{Mock: &m, Standard: &st, Stripe: &sp, PayPal: &pp, Mollie: &mo}
	full.Webhooks = []Webhook{{}}
	possible := make(map[string]string) // variable → key
	for _, s := range settings(&full) {
		possible[s.env] = s.key
	}
	sections := make(map[string]bool) // PAYSTATE_SERVER_, PAYSTATE_PROVIDERS_STRIPE_, ...
	for f := range reflect.TypeFor[Config]().Fields() {
		if name, _, _ := strings.Cut(f.Tag.Get("toml"), ","); name != "" && name != "-" {
			sections[EnvName(name)+"_"] = true
		}
	}

	var out []string
	for _, kv := range environ {
		name, val, _ := strings.Cut(kv, "=")
		if val == "" || present[name] || !strings.HasPrefix(name, EnvPrefix+"_") {
			continue
		}
		generic := name
		if rest, ok := strings.CutPrefix(name, EnvName("webhooks")+"_"); ok {
			if n, tail, ok := strings.Cut(rest, "_"); ok && n != "" && strings.Trim(n, "0123456789") == "" {
				generic = EnvName("webhooks") + "_0_" + tail
				if key, ok := possible[generic]; ok {
					out = append(out, fmt.Sprintf("%s is set, but the file has no [[webhooks]] entry %s: ignored (the environment adds no endpoint; %s)", name, n, strings.Replace(key, "[0]", "["+n+"]", 1)))
					continue
				}
			}
		}
		if key, ok := possible[name]; ok {
			table := key[:strings.LastIndex(key, ".")]
			out = append(out, fmt.Sprintf("%s is set, but the configuration has no [%s]: ignored (the environment adds no provider)", name, table))
			continue
		}
		for sec := range sections {
			if strings.HasPrefix(name, sec) {
				out = append(out, fmt.Sprintf("%s is set, but names no configuration key: ignored", name))
				break
			}
		}
	}
	slices.Sort(out)
	return out
}

// splitList splits a comma-separated list, trimming spaces and dropping
// empty items, so "a, b," is ["a", "b"].
func splitList(s string) []string {
	out := []string{}
	for item := range strings.SplitSeq(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}
