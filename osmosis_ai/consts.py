"""Package identity. Kept import-free so that reading the version costs nothing."""

package_name = "osmosis-ai"
PACKAGE_VERSION = "0.2.18"
