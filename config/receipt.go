package config

import (
	"crypto/x509"
	"errors"
	"fmt"
	"os"

	"github.com/paystate/paystate/receipt"
)

// MaxTemplateBytes is the largest receipt template file accepted.
const MaxTemplateBytes = 1 << 20

// RootCAs returns the certificates that verify the receipt server: the
// system's roots plus those of ca_file; nil (the system's roots alone)
// when ca_file is empty.
func (r Receipt) RootCAs() (*x509.CertPool, error) {
	if r.CAFile == "" {
		return nil, nil
	}
	pem, err := os.ReadFile(r.CAFile)
	if err != nil {
		return nil, err
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool() // no system roots here: the file's alone
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", quote(r.CAFile))
	}
	return pool, nil
}

// readTemplate reads a receipt template file.
func readTemplate(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			return "", pe.Err // the caller names the path
		}
		return "", err
	}
	if len(b) > MaxTemplateBytes {
		return "", fmt.Errorf("larger than %d bytes", MaxTemplateBytes)
	}
	return string(b), nil
}

// ReceiptConfig returns what ripple sends receipts with: the [receipt]
// keys, ca_file and the template files read. smtp_addr empty: receipts
// are off, and so is the returned configuration.
func (r Receipt) ReceiptConfig() (receipt.Config, error) {
	rc := receipt.Config{
		Addr: r.SMTPAddr, From: r.From, MerchantName: r.MerchantName, TLS: receipt.TLSMode(r.TLS),
		Username: r.Username, Password: r.Password,
	}
	if r.SMTPAddr == "" {
		return receipt.Config{}, nil
	}
	var err error
	if rc.RootCAs, err = r.RootCAs(); err != nil {
		return receipt.Config{}, fmt.Errorf("config: receipt.ca_file: %w", err)
	}
	if r.TextTemplate != "" {
		if rc.TextTemplate, err = readTemplate(r.TextTemplate); err != nil {
			return receipt.Config{}, fmt.Errorf("config: receipt.text_template: %s: %w", quote(r.TextTemplate), err)
		}
	}
	if r.HTMLTemplate != "" {
		if rc.HTMLTemplate, err = readTemplate(r.HTMLTemplate); err != nil {
			return receipt.Config{}, fmt.Errorf("config: receipt.html_template: %s: %w", quote(r.HTMLTemplate), err)
		}
	}
	return rc, nil
}
