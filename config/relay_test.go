package config

import (
	"strings"
	"testing"
)

func TestDefaultConfig_Relay(t *testing.T) {
	t.Parallel()
	n := DefaultConfig().Relay.NATS
	for _, tt := range []struct {
		key       string
		got, want any
	}{
		{"relay.nats.url", n.URL, ""},
		{"relay.nats.stream", n.Stream, "PAYSTATE"},
		{"relay.nats.subject_prefix", n.SubjectPrefix, "paystate"},
		{"relay.nats enabled", n.Enabled(), false},
	} {
		if tt.got != tt.want {
			t.Errorf("%s=%v, want %v", tt.key, tt.got, tt.want)
		}
	}
}

// withProvider is a file's text with a provider table, without which no
// file is valid.
func withProvider(toml string) []byte { return []byte("[providers.mock]\n" + toml) }

func TestParse_RelayNATS(t *testing.T) {
	t.Parallel()

	t.Run("OK", func(t *testing.T) {
		t.Parallel()
		c, err := Parse(withProvider("[relay.nats]\nurl = \"nats://127.0.0.1:4222, nats://10.0.0.2:4222\"\nstream = \"SHOP\"\nsubject_prefix = \"shop.paystate\"\n"), nil)
		if err != nil {
			t.Fatal(err)
		}
		want := NATS{URL: "nats://127.0.0.1:4222, nats://10.0.0.2:4222", Stream: "SHOP", SubjectPrefix: "shop.paystate"}
		if got := c.Relay.NATS; got != want || !got.Enabled() {
			t.Fatalf("relay.nats=%+v, want %+v, enabled", got, want)
		}
	})

	t.Run("DefaultsKept", func(t *testing.T) {
		t.Parallel()
		c, err := Parse(withProvider("[relay.nats]\nurl = \"tls://nats.example.com\"\n"), nil)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := c.Relay.NATS, (NATS{URL: "tls://nats.example.com", Stream: "PAYSTATE", SubjectPrefix: "paystate"}); got != want {
			t.Fatalf("relay.nats=%+v, want %+v", got, want)
		}
	})

	t.Run("Env", func(t *testing.T) {
		t.Parallel()
		const fromEnv = "nats://paystate:env-secret@127.0.0.1:4222"
		getenv := env(map[string]string{"PAYSTATE_RELAY_NATS_URL": fromEnv})
		c, err := Parse(withProvider("[relay.nats]\nurl = \"nats://127.0.0.1:4222\"\n"), getenv)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.Relay.NATS.URL; got != fromEnv {
			t.Fatalf("relay.nats.url=%q, want the environment's", got)
		}
		// With no file too: the environment alone turns the relay on.
		c, err = Parse(nil, getenv)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.Relay.NATS.URL; got != fromEnv {
			t.Fatalf("relay.nats.url with no file=%q, want the environment's", got)
		}
		// An empty variable leaves the file's value.
		c, err = Parse(withProvider("[relay.nats]\nurl = \"nats://127.0.0.1:4222\"\n"), env(map[string]string{"PAYSTATE_RELAY_NATS_URL": ""}))
		if err != nil {
			t.Fatal(err)
		}
		if got, want := c.Relay.NATS.URL, "nats://127.0.0.1:4222"; got != want {
			t.Fatalf("relay.nats.url=%q, want %q", got, want)
		}
	})

	t.Run("UnknownKey", func(t *testing.T) {
		t.Parallel()
		for _, tt := range []struct{ toml, key string }{
			{"[relay.nats]\nurls = \"nats://127.0.0.1\"\n", "relay.nats.urls"},
			{"[relay.nats]\nURL = \"nats://127.0.0.1\"\n", "relay.nats.URL"},
			{"[relay.kafka]\nurl = \"x\"\n", "relay.kafka"},
		} {
			_, err := Parse([]byte(tt.toml), nil)
			if err == nil || !strings.Contains(err.Error(), `"`+tt.key+`"`) {
				t.Errorf("Parse(%q)=%v, want unknown key %q", tt.toml, err, tt.key)
			}
		}
	})
}

func TestConfig_Validate_RelayNATS(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		n    NATS
		key  string // "" = valid
	}{
		{"Off", NATS{Stream: "PAYSTATE", SubjectPrefix: "paystate"}, ""},
		{"Cluster", NATS{URL: "nats://a:4222,tls://b:4443, wss://c/nats", Stream: "S", SubjectPrefix: "a.b-c_d"}, ""},
		{"Credentials", NATS{URL: "nats://user:pass@127.0.0.1:4222", Stream: "S", SubjectPrefix: "p"}, ""},
		{"HTTP", NATS{URL: "http://127.0.0.1:4222", Stream: "S", SubjectPrefix: "p"}, "relay.nats.url"},
		{"NoScheme", NATS{URL: "127.0.0.1:4222", Stream: "S", SubjectPrefix: "p"}, "relay.nats.url"},
		{"Blank", NATS{URL: " ", Stream: "S", SubjectPrefix: "p"}, "relay.nats.url"},
		{"EmptyServer", NATS{URL: "nats://a:4222,", Stream: "S", SubjectPrefix: "p"}, "relay.nats.url"},
		{"BadPort", NATS{URL: "nats://a:99999", Stream: "S", SubjectPrefix: "p"}, "relay.nats.url"},
		{"NoStream", NATS{Stream: "", SubjectPrefix: "p"}, "relay.nats.stream"},
		{"StreamDot", NATS{Stream: "PAY.STATE", SubjectPrefix: "p"}, "relay.nats.stream"},
		{"StreamSpace", NATS{Stream: "PAY STATE", SubjectPrefix: "p"}, "relay.nats.stream"},
		{"StreamWildcard", NATS{Stream: "PAY*", SubjectPrefix: "p"}, "relay.nats.stream"},
		{"StreamLong", NATS{Stream: strings.Repeat("S", maxNATSName+1), SubjectPrefix: "p"}, "relay.nats.stream"},
		{"NoPrefix", NATS{Stream: "S", SubjectPrefix: ""}, "relay.nats.subject_prefix"},
		{"PrefixWildcard", NATS{Stream: "S", SubjectPrefix: "paystate.*"}, "relay.nats.subject_prefix"},
		{"PrefixTail", NATS{Stream: "S", SubjectPrefix: "paystate.>"}, "relay.nats.subject_prefix"},
		{"PrefixEmptyToken", NATS{Stream: "S", SubjectPrefix: "a..b"}, "relay.nats.subject_prefix"},
		{"PrefixTrailingDot", NATS{Stream: "S", SubjectPrefix: "paystate."}, "relay.nats.subject_prefix"},
		{"PrefixSpace", NATS{Stream: "S", SubjectPrefix: "pay state"}, "relay.nats.subject_prefix"},
		{"PrefixSystem", NATS{Stream: "S", SubjectPrefix: "$JS.paystate"}, "relay.nats.subject_prefix"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := DefaultConfig()
			c.Relay.NATS = tt.n
			err := c.Validate()
			switch {
			case tt.key == "" && err != nil:
				t.Fatalf("Validate: %v", err)
			case tt.key != "" && (err == nil || !strings.Contains(err.Error(), "config: "+tt.key+": ")):
				t.Fatalf("Validate=%v, want an error naming %s", err, tt.key)
			}
		})
	}

	t.Run("NoPasswordInMessage", func(t *testing.T) {
		t.Parallel()
		c := DefaultConfig()
		c.Relay.NATS.URL = "nats://127.0.0.1:4222,http://paystate:hunter22@10.0.0.2:4222"
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), "relay.nats.url") || !strings.Contains(err.Error(), "server 2") {
			t.Fatalf("Validate=%v, want an error naming relay.nats.url and the second server", err)
		}
		if strings.Contains(err.Error(), "hunter22") {
			t.Fatalf("the message quotes the password: %v", err)
		}
	})
}

// TestConfig_Masked_RelayNATS: `paystate check` prints the [relay.nats]
// section with the credentials of every server masked.
func TestConfig_Masked_RelayNATS(t *testing.T) {
	t.Parallel()
	c := DefaultConfig()
	c.Relay.NATS = NATS{URL: "nats://paystate:hunter22@a:4222,nats://s3cr3t-token@b:4222,nats://c:4222", Stream: "SHOP", SubjectPrefix: "shop.paystate"}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	m := c.Masked()
	if got, want := m.Relay.NATS.URL, "nats://paystate:***@a:4222,nats://***@b:4222,nats://c:4222"; got != want {
		t.Fatalf("masked url=%q, want %q", got, want)
	}
	if c.Relay.NATS.URL == m.Relay.NATS.URL {
		t.Fatal("Masked changed its receiver")
	}
	out, err := m.TOML()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"[relay.nats]\n", `url = "nats://paystate:***@a:4222,nats://***@b:4222,nats://c:4222"`, `stream = "SHOP"`, `subject_prefix = "shop.paystate"`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("TOML() lacks %q:\n%s", want, out)
		}
	}
	for _, secret := range []string{"hunter22", "s3cr3t-token"} {
		if strings.Contains(string(out), secret) {
			t.Errorf("TOML() shows %q:\n%s", secret, out)
		}
	}
	if got := DefaultConfig().Masked().Relay.NATS.URL; got != "" {
		t.Fatalf("masked empty url=%q, want empty", got)
	}
}
