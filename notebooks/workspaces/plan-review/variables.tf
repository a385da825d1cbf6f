variable "db_password" {
  description = "Password of the orders database (set in terraform.tfvars)."
  type        = string
  sensitive   = true
}

variable "api_version" {
  description = "Release of the orders API to run."
  type        = string
  default     = "1.5.0"
}
