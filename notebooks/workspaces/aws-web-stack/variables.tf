variable "region" {
  description = "AWS region of the stack."
  type        = string
  default     = "eu-west-1"
}

variable "environment" {
  description = "Deployment environment (prod, staging)."
  type        = string
}

variable "vpc_cidr" {
  description = "CIDR block of the VPC."
  type        = string
  default     = "10.40.0.0/16"
}

variable "instance_type" {
  description = "EC2 instance type of the web tier."
  type        = string
  default     = "t3.small"
}

variable "tags" {
  description = "Tags applied to every taggable resource."
  type        = map(string)
  default = {
    owner       = "platform-team"
    cost-center = "cc-1042"
  }
}
