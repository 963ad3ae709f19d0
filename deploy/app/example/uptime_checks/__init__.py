"""An application's checks, as a team would write them (deploy/app: recheck beside your own MySQL)."""
