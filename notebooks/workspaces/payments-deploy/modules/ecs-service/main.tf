variable "name" {
  type = string
}

variable "environment" {
  type = string
}

variable "image_tag" {
  type = string
}

variable "desired_count" {
  type = number
}

resource "aws_ecs_task_definition" "this" {
  family                   = "${var.name}-${var.environment}"
  requires_compatibilities = ["FARGATE"]
  network_mode             = "awsvpc"
  cpu                      = 512
  memory                   = 1024

  container_definitions = jsonencode([{
    name  = var.name
    image = "123456789012.dkr.ecr.eu-west-1.amazonaws.com/${var.name}:${var.image_tag}"
  }])

  tags = { service = var.name, environment = var.environment }
}

resource "aws_ecs_service" "this" {
  name            = var.name
  cluster         = var.environment
  task_definition = aws_ecs_task_definition.this.arn
  desired_count   = var.desired_count

  deployment_circuit_breaker {
    enable   = false
    rollback = false
  }

  wait_for_steady_state = true

  tags = { service = var.name, environment = var.environment }
}
