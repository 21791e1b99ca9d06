package config

import (
	"strings"
	"testing"
)

const paypalTOML = `
[providers.paypal]
client_id = "AeClientID"
webhook_id = "1JE4291016473214C"
api_base = "https://api-m.sandbox.paypal.com"
cert_hosts = ["api.sandbox.paypal.com"]
return_url = "https://shop.example/paid"
`

func TestParse_PayPal(t *testing.T) {
	t.Parallel()
	env := map[string]string{"PAYSTATE_PROVIDERS_PAYPAL_SECRET": "EGsecretfromenv"}
	c, err := Parse([]byte(paypalTOML), func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	pp := c.Providers.PayPal
	if pp == nil {
		t.Fatal("[providers.paypal] present, Providers.PayPal nil")
	}
	for _, tc := range []struct{ key, got, want string }{
		{"providers.paypal.client_id", pp.ClientID, "AeClientID"},
		{"providers.paypal.secret", pp.Secret, "EGsecretfromenv"},
		{"providers.paypal.webhook_id", pp.WebhookID, "1JE4291016473214C"},
		{"providers.paypal.cert_hosts", strings.Join(pp.CertHosts, ","), "api.sandbox.paypal.com"},
		{"payment.provider", c.Payment.Provider, ProviderPayPal},
	} {
		if tc.got != tc.want {
			t.Errorf("%s=%q, want %q", tc.key, tc.got, tc.want)
		}
	}
	out, err := c.Masked().TOML()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "EGsecretfromenv") || !strings.Contains(string(out), "[providers.paypal]") {
		t.Fatalf("check output shows the secret or misses the table:\n%s", out)
	}
}

func TestParse_PayPal_Errors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, toml, key string
	}{
		{"NoSecret", paypalTOML, "providers.paypal.secret"},
		{"NoClientID", "[providers.paypal]\nsecret = \"s\"\nwebhook_id = \"W\"\n", "providers.paypal.client_id"},
		{"NoWebhookID", "[providers.paypal]\nsecret = \"s\"\nclient_id = \"C\"\n", "providers.paypal.webhook_id"},
		{"Verify", "[providers.paypal]\nsecret = \"s\"\nclient_id = \"C\"\nwebhook_id = \"W\"\nverify = \"trust\"\n", "providers.paypal.verify"},
		{"CertHost", "[providers.paypal]\nsecret = \"s\"\nclient_id = \"C\"\nwebhook_id = \"W\"\ncert_hosts = [\"https://evil/\"]\n", "providers.paypal.cert_hosts[0]"},
		{"CAFile", "[providers.paypal]\nsecret = \"s\"\nclient_id = \"C\"\nwebhook_id = \"W\"\nca_file = \"/nonexistent/ca.pem\"\n", "providers.paypal.ca_file"},
		{"ReturnURL", "[providers.paypal]\nsecret = \"s\"\nclient_id = \"C\"\nwebhook_id = \"W\"\nreturn_url = \"/paid\"\n", "providers.paypal.return_url"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.toml), func(string) string { return "" })
			if err == nil || !strings.Contains(err.Error(), tc.key) {
				t.Fatalf("err=%v, want one naming %s", err, tc.key)
			}
		})
	}
}
