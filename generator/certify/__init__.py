"""The portability certificate: in-toto statements about an image (its SBOM, how it was made, the suite's
verdicts), signed as DSSE envelopes and attached to the image in its registry (docs/certificate.md)."""
