environment   = "prod"
instance_type = "t3.medium"
