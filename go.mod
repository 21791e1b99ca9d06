module github.com/paystate/paystate

go 1.26.0

require (
	github.com/BurntSushi/toml v1.6.0
	github.com/VictoriaMetrics/metrics v1.45.0
	github.com/mattn/go-isatty v0.0.20
	github.com/oklog/ulid/v2 v2.1.2
	github.com/rs/zerolog v1.35.1
	github.com/svix/svix-webhooks v1.44.0
	github.com/valyala/fasthttp v1.78.0
	go.etcd.io/bbolt v1.4.3
	golang.org/x/sync v0.25.0
)

require (
	github.com/klauspost/compress v1.20.3 // indirect
	github.com/mattn/go-colorable v0.1.14 // indirect
	github.com/molecule-man/go-brrr v1.3.1 // indirect
	github.com/valyala/bytebufferpool v1.0.0 // indirect
	github.com/valyala/fastrand v1.1.0 // indirect
	github.com/valyala/histogram v1.2.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	gopkg.in/validator.v2 v2.0.1 // indirect
)
