module github.com/paystate/paystate

go 1.26.0

require (
	github.com/BurntSushi/toml v1.6.0
	github.com/VictorAvelar/mollie-api-go/v4 v4.16.0
	github.com/VictoriaMetrics/metrics v1.45.0
	github.com/fxamacker/cbor/v2 v2.10.0
	github.com/jackc/pgx/v5 v5.12.0
	github.com/mattn/go-isatty v0.0.22
	github.com/oklog/ulid/v2 v2.1.2
	github.com/plutov/paypal/v4 v4.17.0
	github.com/rs/zerolog v1.35.1
	github.com/svix/svix-webhooks v1.44.0
	github.com/valyala/fasthttp v1.78.0
	go.etcd.io/bbolt v1.5.0
	golang.org/x/sync v0.25.0
)

require (
	github.com/google/go-querystring v1.2.0 // indirect
	github.com/google/uuid v1.6.0 // indirect
	golang.org/x/exp/typeparams v0.0.0-20250210185358-939b2ce775ac // indirect
	golang.org/x/mod v0.41.0 // indirect
	golang.org/x/tools v0.51.0 // indirect
	honnef.co/go/tools v0.8.2 // indirect
)

require (
	github.com/bahlo/generic-list-go v0.2.0 // indirect
	github.com/basgys/goxml2json v1.1.1-0.20231018121955-e66ee54ceaad // indirect
	github.com/buger/jsonparser v1.6.1 // indirect
	github.com/dustin/go-humanize v1.1.0
	github.com/go-openapi/jsonpointer v1.0.2 // indirect
	github.com/mitchellh/colorstring v0.0.0-20190213212951-d06e56a500db // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/pandatix/go-abnf v0.5.3 // indirect
	github.com/pb33f/go-yaml v0.1.1
	github.com/pb33f/jsonpath v0.8.5 // indirect
	github.com/pb33f/jsonschema/v6 v6.0.3 // indirect
	github.com/pb33f/libopenapi v0.42.4
	github.com/pb33f/libopenapi-validator v0.16.2
	github.com/pb33f/ordered-map/v2 v2.3.2 // indirect
	github.com/prometheus/client_model v0.6.3
	github.com/prometheus/common v0.73.1
	github.com/rivo/uniseg v0.4.7 // indirect
	github.com/schollz/progressbar/v3 v3.19.1
	github.com/wneessen/go-mail v0.8.1
	go.yaml.in/yaml/v2 v2.4.4 // indirect
	golang.org/x/net v0.62.0 // indirect
	golang.org/x/term v0.47.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
	sigs.k8s.io/yaml v1.6.0
)

require (
	github.com/antithesishq/antithesis-sdk-go v0.9.0-default-no-op // indirect
	github.com/google/go-tpm v0.9.8 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	github.com/minio/highwayhash v1.0.4 // indirect
	github.com/nats-io/jwt/v2 v2.8.3 // indirect
	github.com/nats-io/nats-server/v2 v2.15.3
	github.com/nats-io/nats.go v1.55.0
	github.com/nats-io/nkeys v0.4.17 // indirect
	github.com/nats-io/nuid v1.0.1 // indirect
	github.com/x448/float16 v0.8.4 // indirect
	golang.org/x/crypto v0.58.0 // indirect
	golang.org/x/text v0.43.0 // indirect
)

require (
	github.com/anishathalye/porcupine v1.3.1
	github.com/chromedp/cdproto v0.159.0 // indirect
	github.com/chromedp/chromedp v0.23.0
	github.com/emersion/go-sasl v0.0.0-20241020182733-b788ff22d5a6
	github.com/emersion/go-smtp v0.25.1
	github.com/go-json-experiment/json v0.0.0-20260213210345-44df1a37e875
	github.com/klauspost/compress v1.20.4
	github.com/mattn/go-colorable v0.1.14 // indirect
	github.com/molecule-man/go-brrr v1.3.1 // indirect
	github.com/stripe/stripe-go/v85 v85.0.0
	github.com/valyala/bytebufferpool v1.0.0 // indirect
	github.com/valyala/fastrand v1.1.0 // indirect
	github.com/valyala/histogram v1.2.0 // indirect
	go.uber.org/goleak v1.3.0
	golang.org/x/sys v0.50.0
	golang.org/x/time v0.16.0
	gopkg.in/validator.v2 v2.0.1 // indirect
	pgregory.net/rapid v1.3.0
)

tool honnef.co/go/tools/cmd/staticcheck
