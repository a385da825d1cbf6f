import './base.css';
import './console.css';
