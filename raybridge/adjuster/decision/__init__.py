"""raybridge/adjuster/decision"""
