"""raybridge/queues/decision"""
