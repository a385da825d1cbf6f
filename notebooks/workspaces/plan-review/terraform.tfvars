# Sample value for the runbook; terraform marks it sensitive (variables.tf).
db_password = "Orders-Db-Sample-7731"
