"""raybridge/jobs/decision"""
