"""Package identity. Kept import-free so that reading the version costs nothing."""

package_name = "osmosis-ai"
PACKAGE_VERSION = "0.3.9"
SERVER_KEY_ENV = "OSMOSIS_SERVER_API_KEY"  # the Bearer key of a rollout server run elsewhere
