"""The worker role: pop ids in batches, run the team's check, write results back, acknowledge."""
